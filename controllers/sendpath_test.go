/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

// sendObject is an object of a kind the send path serves.
type sendObject interface {
	client.Object
	conditions.Getter
}

// sendKind is what the fault tests need to know of a kind: how to make an
// object of it that sends at once, and how to read its record.
type sendKind struct {
	name      string
	newObject func() sendObject
	messageID func(sendObject) string
	// variable is the Mailgun variable naming the object in its email.
	variable string
	// start starts the manager with opts and provides what the kind's
	// objects wait for, so that one created next sends at once.
	start func(h *harness, opts ...func(*operator.Options))
	// create creates the object name with annotations.
	create func(h *harness, name string, annotations map[string]string)
	// email is obj's request email, as another replica would send it.
	email func(obj sendObject, messageID string) mailer.Request
}

// sendKinds are the kinds the send path serves.
var sendKinds = []sendKind{mailgunClusterKind, mailgunMachineKind}

var (
	mailgunClusterKind = sendKind{
		name:      "MailgunCluster",
		newObject: func() sendObject { return &infrav1.MailgunCluster{} },
		messageID: func(o sendObject) string { return o.(*infrav1.MailgunCluster).Status.MessageID },
		variable:  mailer.VarCluster,
		start:     func(h *harness, opts ...func(*operator.Options)) { h.startManager(opts...) },
		create: func(h *harness, name string, annotations map[string]string) {
			h.createOwned(name, func(mc *infrav1.MailgunCluster) { mc.Annotations = annotations })
		},
		email: func(o sendObject, id string) mailer.Request {
			mc := o.(*infrav1.MailgunCluster)
			return mailer.ClusterEmail{Priority: string(mc.Spec.Priority), Request: mc.Spec.Request, Requester: mc.Spec.Requester,
				Object: mc.Namespace + "/" + mc.Name, UID: string(mc.UID)}.Email(id)
		},
	}
	mailgunMachineKind = sendKind{
		name:      "MailgunMachine",
		newObject: func() sendObject { return &infrav1.MailgunMachine{} },
		messageID: func(o sendObject) string { return o.(*infrav1.MailgunMachine).Status.MessageID },
		variable:  mailer.VarMachine,
		// The machine fixture, its Cluster provisioned with the control
		// plane initialized (as Cluster API would report them).
		start: func(h *harness, opts ...func(*operator.Options)) {
			f := machineFixtureIn(h)
			h.startManager(opts...)
			h.waitForAccepted("prod", 20*time.Second)
			f.setClusterStatus(true, true)
		},
		// The Machine first, and the MailgunMachine already owned by
		// it: its first reconcile takes the send path, as a
		// MailgunCluster's does.
		create: func(h *harness, name string, annotations map[string]string) {
			m := newMachine(h.ns, name+"-machine", name, ptr.To("worker-0-bootstrap"))
			if err := h.c.Create(h.ctx, m); err != nil {
				h.t.Fatalf("creating Machine: %v", err)
			}
			mm := newMailgunMachine(h.ns, name)
			mm.Annotations = annotations
			mm.OwnerReferences = []metav1.OwnerReference{machineOwner(m)}
			if err := h.c.Create(h.ctx, mm); err != nil {
				h.t.Fatalf("creating MailgunMachine: %v", err)
			}
		},
		email: func(o sendObject, id string) mailer.Request {
			mm := o.(*infrav1.MailgunMachine)
			return mailer.MachineEmail{Priority: string(mm.Spec.Priority), Object: mm.Namespace + "/" + mm.Name, UID: string(mm.UID),
				ProviderID: mm.Spec.ProviderID, Request: mm.Spec.Request}.Email(id)
		},
	}
)

// kindHarness is a test's harness with the kind under test.
type kindHarness struct {
	*harness
	kind sendKind
}

func (h kindHarness) object(name string) sendObject {
	h.t.Helper()
	obj := h.kind.newObject()
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.ns, Name: name}, obj); err != nil {
		h.t.Fatalf("getting %s %s: %v", h.kind.name, name, err)
	}
	return obj
}

func (h kindHarness) emailsOf(name string) []mailgunfake.Message {
	return h.fake.MessagesWithVariable(h.kind.variable, h.ns+"/"+name)
}

// is reports whether obj is of the kind under test.
func (h kindHarness) is(obj client.Object) bool {
	return reflect.TypeOf(obj) == reflect.TypeOf(h.kind.newObject())
}

func (h kindHarness) waitForSendReason(name, reason string, timeout time.Duration) sendObject {
	h.t.Helper()
	var obj sendObject
	h.eventually(timeout, fmt.Sprintf("EmailSent reason %s on %s %s", reason, h.kind.name, name), func() (bool, string) {
		obj = h.object(name)
		c := conditions.Get(obj, infrav1.EmailSentCondition)
		if c == nil {
			return false, "no EmailSent condition"
		}
		return c.Reason == reason, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	})
	return obj
}

// waitForRecord waits until the object records an accepted email, and
// returns its message ID.
func (h kindHarness) waitForRecord(name string, timeout time.Duration) string {
	h.t.Helper()
	h.waitForSendReason(name, infrav1.EmailAcceptedReason, timeout)
	var id string
	h.eventually(timeout, "status.messageID on "+name, func() (bool, string) {
		obj := h.object(name)
		id = h.kind.messageID(obj)
		return id != "" && obj.GetAnnotations()[infrav1.AcceptedMessageIDAnnotation] == id, fmt.Sprintf("status %q, annotations %v", id, obj.GetAnnotations())
	})
	return id
}

// sentOnce checks that exactly one email went out for name and that the
// object records it.
func (h kindHarness) sentOnce(name, recorded string) {
	h.t.Helper()
	h.consistently(time.Second, "exactly one email for "+name, func() (bool, string) {
		n := len(h.emailsOf(name))
		return n == 1, fmt.Sprintf("%d emails", n)
	})
	if emails := h.emailsOf(name); emails[0].ID != recorded {
		h.t.Errorf("recorded %q, want the accepted message %q", recorded, emails[0].ID)
	}
}

// lookedUp checks that the operator looked the email up in Mailgun's
// events: it learnt of the acceptance there, not from a send's reply.
func (h kindHarness) lookedUp(messageID string) {
	h.t.Helper()
	if h.fake.EventRequestsFor(messageID) == 0 {
		h.t.Errorf("Mailgun's events were not consulted for %s: the fault did not reach the send", messageID)
	}
}

// TestSendPathFaultsSendOnce drives the one send path through each fault it
// must survive, for every kind it serves: exactly one email per object,
// recorded with the ID Mailgun accepted.
func TestSendPathFaultsSendOnce(t *testing.T) {
	faults := []struct {
		name string
		run  func(t *testing.T, h kindHarness)
	}{
		{"reply lost after Mailgun accepted", func(_ *testing.T, h kindHarness) {
			h.kind.start(h.harness)
			h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndDropReply})
			h.kind.create(h.harness, "lost-reply", nil)
			id := h.waitForRecord("lost-reply", 20*time.Second)
			h.sentOnce("lost-reply", id)
			h.lookedUp(id)
		}},
		// Mailgun may queue a message and still answer 5xx; the operator
		// must look it up, not send it again.
		{"accepted then 500", acceptedThen(500)},
		{"accepted then 502", acceptedThen(502)},
		{"accepted then 503", acceptedThen(503)},
		{"accepted then 504", acceptedThen(504)},
		{"unanswered send is retried only after settling", func(_ *testing.T, h kindHarness) {
			h.kind.start(h.harness, func(o *operator.Options) { o.SettleTime = 5 * time.Second })
			// The first send hangs past the client timeout and is not
			// accepted.
			h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.Hang})
			before, _ := h.fake.Requests()
			h.kind.create(h.harness, "hang", nil)
			h.waitForSendReason("hang", infrav1.SendOutcomeUnknownReason, 20*time.Second)
			// While the attempt settles, the controller looks but does
			// not resend.
			h.consistently(2*time.Second, "no second send while settling", func() (bool, string) {
				sends, _ := h.fake.Requests()
				return sends-before == 1, fmt.Sprintf("%d send requests", sends-before)
			})
			h.sentOnce("hang", h.waitForRecord("hang", 30*time.Second))
		}},
		// When writing the record of an accepted email fails, the process
		// keeps the accepted ID until the record is written. Mailgun's
		// events lag (here for longer than the settle time), so a lookup
		// would find nothing and the email would go out again.
		{"record writes fail", func(t *testing.T, h kindHarness) {
			h.fake.SetEventLag(time.Hour)
			fc := &faultyClient{target: h.is, failRecord: 2, failStatus: 3}
			h.kind.start(h.harness, func(o *operator.Options) {
				o.WrapClient = func(c client.Client) client.Client { fc.Client = c; return fc }
			})
			h.kind.create(h.harness, "flaky-writes", nil)
			id := h.waitForRecord("flaky-writes", 30*time.Second)
			if fc.failures() < 5 {
				t.Fatalf("only %d writes failed; the test did not exercise the failures", fc.failures())
			}
			h.sentOnce("flaky-writes", id)
		}},
		// When the reply to the claim write is lost, the claim may be
		// stored, but this process knows it never sent under it, so it
		// sends without waiting for Mailgun's events to settle.
		{"claim reply lost", func(t *testing.T, h kindHarness) {
			fc := &faultyClient{target: h.is, loseClaimReply: 1}
			h.kind.start(h.harness, func(o *operator.Options) {
				o.SettleTime = time.Minute
				o.WrapClient = func(c client.Client) client.Client { fc.Client = c; return fc }
			})
			h.kind.create(h.harness, "lost-claim-reply", nil)
			id := h.waitForRecord("lost-claim-reply", 20*time.Second)
			if fc.failures() != 1 {
				t.Fatalf("%d claim replies lost, want 1", fc.failures())
			}
			h.sentOnce("lost-claim-reply", id)
		}},
		// A replica whose claim was replaced by a successor's (it was
		// frozen after its claim; the successor took over, settled and
		// sent) does not send: right before sending it reads the live
		// object (it runs without leader election, so no Lease vouches for
		// its claim) and finds the claim is not its own. It then finds the
		// successor's email in Mailgun's events and records it.
		{"stale claim is fenced", func(t *testing.T, h kindHarness) {
			successor := mailer.New(mailer.Settings{Domain: testDomain, APIKey: testAPIKey, Recipient: testRecipient, APIBase: h.fake.APIBase()}, time.Second)
			// The takeover runs in the operator's goroutine: it reports
			// with t.Errorf, never t.Fatalf.
			tc := &takeoverClient{target: h.is, takeover: func(ctx context.Context, obj client.Object) {
				if _, err := successor.Send(ctx, h.kind.email(obj.(sendObject), obj.GetAnnotations()[infrav1.MessageIDAnnotation])); err != nil {
					t.Errorf("the successor's send: %v", err)
				}
				live := h.kind.newObject()
				if err := h.c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
					t.Errorf("reading the claimed object: %v", err)
					return
				}
				base := live.DeepCopyObject().(client.Object)
				ann := live.GetAnnotations()
				ann[infrav1.SendAttemptedAtAnnotation] = sendprotocol.ClaimValue(time.Now(), "successor")
				live.SetAnnotations(ann)
				if err := h.c.Patch(ctx, live, client.MergeFrom(base)); err != nil {
					t.Errorf("the successor's claim: %v", err)
				}
			}}
			h.kind.start(h.harness, func(o *operator.Options) {
				o.WrapClient = func(c client.Client) client.Client { tc.Client = c; return tc }
			})
			h.kind.create(h.harness, "stale-claim", nil)
			h.sentOnce("stale-claim", h.waitForRecord("stale-claim", 20*time.Second))
			if !tc.tookOver() {
				t.Fatal("the successor never took over: the test did not exercise the fence")
			}
			h.noErrorLogged()
		}},
		// A cache that lags behind the operator's own writes shows the
		// object from before its send: optimistic locking refuses writes
		// from that copy, and no second email goes out.
		{"stale cache", func(t *testing.T, h kindHarness) {
			sr := &staleReader{target: h.is, pristine: map[client.ObjectKey]client.Object{}}
			h.kind.start(h.harness, func(o *operator.Options) {
				o.WrapClient = func(c client.Client) client.Client { sr.Client = c; return sr }
			})
			h.kind.create(h.harness, "stale", nil)
			id := h.waitForRecord("stale", 20*time.Second)
			// Any change triggers reconciles, which now see the stale copy.
			obj := h.object("stale")
			patchObj(h.harness, obj, func() { obj.SetLabels(map[string]string{"touched": "yes"}) })
			h.eventually(10*time.Second, "the stale copy to be served", func() (bool, string) {
				return sr.servedCount() > 0, "not yet"
			})
			h.consistently(2*time.Second, "exactly one email, and Ready kept", func() (bool, string) {
				n := len(h.emailsOf("stale"))
				// A status write from the stale copy would replace the
				// conditions list; optimistic locking makes it fail.
				ready := conditions.IsTrue(h.object("stale"), infrav1.ReadyCondition)
				return n == 1 && ready, fmt.Sprintf("%d emails, Ready=%v", n, ready)
			})
			if got := h.object("stale"); h.kind.messageID(got) != id || got.GetAnnotations()[infrav1.AcceptedMessageIDAnnotation] != id {
				t.Errorf("the record was lost: status %q, annotations %v", h.kind.messageID(got), got.GetAnnotations())
			}
		}},
		// An object created with another one's send record (a GitOps copy,
		// a restore under a new name) drops the copied record and sends
		// its own email, instead of becoming Ready on the other's.
		{"copied send record", func(t *testing.T, h kindHarness) {
			h.kind.start(h.harness)
			h.kind.create(h.harness, "original", nil)
			original := h.waitForRecord("original", 20*time.Second)
			copied := map[string]string{}
			for k, v := range h.object("original").GetAnnotations() {
				if strings.HasPrefix(k, "mailgun.infrastructure.cluster.x-k8s.io/") {
					copied[k] = v
				}
			}
			h.kind.create(h.harness, "copy", copied)
			got := h.waitForRecord("copy", 20*time.Second)
			if got == original {
				t.Errorf("the copy recorded the original's email %s", got)
			}
			h.sentOnce("original", original)
			h.sentOnce("copy", got)
			if sentFor := h.object("copy").GetAnnotations()[infrav1.SentForAnnotation]; sentFor != h.ns+"/copy" {
				t.Errorf("sent-for = %q, want %q", sentFor, h.ns+"/copy")
			}
			h.noErrorLogged()
		}},
		// A resend request sends one more email per new request value,
		// with a new Message-Id, and keeps the earlier ones in the history.
		{"resend on request", func(t *testing.T, h kindHarness) {
			h.kind.start(h.harness)
			h.kind.create(h.harness, "again", nil)
			first := h.waitForRecord("again", 20*time.Second)
			obj := h.object("again")
			patchObj(h.harness, obj, func() {
				ann := obj.GetAnnotations()
				ann[infrav1.ResendRequestAnnotation] = "1"
				obj.SetAnnotations(ann)
			})
			h.eventually(20*time.Second, "a second email, recorded", func() (bool, string) {
				got := h.object("again")
				id := h.kind.messageID(got)
				return id != first && got.GetAnnotations()[infrav1.AcceptedMessageIDAnnotation] == id, fmt.Sprintf("status %q", id)
			})
			h.consistently(time.Second, "two emails", func() (bool, string) {
				n := len(h.emailsOf("again"))
				return n == 2, fmt.Sprintf("%d emails", n)
			})
			if history := h.object("again").GetAnnotations()[infrav1.MessageIDHistoryAnnotation]; history != first {
				t.Errorf("history = %q, want the first message ID %q", history, first)
			}
		}},
	}
	for _, kind := range sendKinds {
		for _, fault := range faults {
			t.Run(kind.name+"/"+fault.name, func(t *testing.T) {
				fault.run(t, kindHarness{harness: newHarness(t), kind: kind})
			})
		}
	}
}

func acceptedThen(status int) func(t *testing.T, h kindHarness) {
	return func(_ *testing.T, h kindHarness) {
		h.kind.start(h.harness)
		h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndFail, Status: status, Body: `{"message":"internal error"}`})
		h.kind.create(h.harness, "accepted-5xx", nil)
		id := h.waitForRecord("accepted-5xx", 20*time.Second)
		h.sentOnce("accepted-5xx", id)
		h.lookedUp(id)
	}
}

// faultyClient fails chosen writes to objects of the target kind before
// they reach the apiserver, to test what happens when recording an
// accepted email fails.
type faultyClient struct {
	client.Client
	target func(client.Object) bool
	mu     sync.Mutex
	// failRecord fails this many metadata patches that record an accepted
	// email.
	failRecord int
	// failStatus fails this many status writes.
	failStatus int
	// loseClaimReply lets this many send claims reach the apiserver, then
	// reports a failure, like a reply lost on the way back.
	loseClaimReply int
	failed         int
}

var errInjected = errors.New("injected apiserver write failure")

func (c *faultyClient) take(n *int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *n > 0 {
		*n--
		c.failed++
		return true
	}
	return false
}

func (c *faultyClient) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

func (c *faultyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	ours := c.target(obj)
	if ours && obj.GetAnnotations()[infrav1.AcceptedMessageIDAnnotation] != "" && c.take(&c.failRecord) {
		return errInjected
	}
	if ours && obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation] != "" && c.take(&c.loseClaimReply) {
		if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		return errInjected
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *faultyClient) Status() client.SubResourceWriter {
	return &faultyStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type faultyStatus struct {
	client.SubResourceWriter
	c *faultyClient
}

func (s *faultyStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.target(obj) && s.c.take(&s.c.failStatus) {
		return errInjected
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s *faultyStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.target(obj) && s.c.take(&s.c.failStatus) {
		return errInjected
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// staleReader serves, once the real object of the target kind records an
// accepted email, an old copy of it from before the first send: what a
// lagging cache shows.
type staleReader struct {
	client.Client
	target   func(client.Object) bool
	mu       sync.Mutex
	pristine map[client.ObjectKey]client.Object
	served   int
}

func (c *staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if !c.target(obj) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, seen := c.pristine[key]
	ann := obj.GetAnnotations()
	switch {
	case !seen && ann[infrav1.MessageIDAnnotation] == "":
		c.pristine[key] = obj.DeepCopyObject().(client.Object)
	case seen && ann[infrav1.AcceptedMessageIDAnnotation] != "" && c.served < 3:
		c.served++
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(old.DeepCopyObject()).Elem())
	}
	return nil
}

func (c *staleReader) servedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served
}

// takeoverClient plays a successor that took over while this replica was
// frozen right after its claim write to an object of the target kind: once
// the claim is stored, the successor sends the email itself and writes its
// own claim, before this replica goes on.
type takeoverClient struct {
	client.Client
	target   func(client.Object) bool
	takeover func(ctx context.Context, obj client.Object)
	once     sync.Once
	done     atomic.Bool
}

func (c *takeoverClient) tookOver() bool { return c.done.Load() }

func (c *takeoverClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if c.target(obj) && obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation] != "" {
		c.once.Do(func() {
			c.takeover(ctx, obj.DeepCopyObject().(client.Object))
			c.done.Store(true)
		})
	}
	return nil
}
