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

package send

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// DeliveryPages reads delivery events page by page, oldest first;
// *mailer.DeliveryEvents implements it.
type DeliveryPages interface {
	// Next reads a page: the outcome per Message-Id (without angle
	// brackets), the time of its last event, and whether more may follow.
	Next(ctx context.Context) (outcomes map[string]mailer.Delivery, last time.Time, full bool, err error)
}

// clockSkew is how much earlier than an acceptance, as our clock saw it,
// Mailgun's clock may have stamped its events.
const clockSkew = time.Minute

// maxPollBackoff bounds the interval between reads of one account's events,
// as a multiple of DeliveryTracker.Interval.
const maxPollBackoff = 40

// maxPagesPerPoll bounds the pages one poll reads while they come full: a
// quiet account costs one request per poll, a busy one catches up.
const maxPagesPerPoll = 5

// DeliveryTracker follows the delivery of accepted emails. For each
// recipient on a Mailgun domain (mailer.Settings.Events) it sweeps the
// delivery events from the oldest acceptance without an outcome, one page
// per poll, up to maxPagesPerPoll while pages come full, whatever the
// number of emails followed: the cost of tracking grows with time and with
// the traffic to the recipient, not with the number of objects. A sweep
// interrupted by a failed read resumes where it was; a finished one starts
// over at the next poll, because events lag. Polls come less often as the
// youngest email followed ages, and use only the request budget sends
// leave (mailer's limitTransport). A reconcile registers an email with
// Follow and reads what is known with Lookup; the tracker brings the
// object back (Source) when news arrives, and forgets emails older than
// Timeout by itself.
//
// It runs on the leader only, as the reconcilers do.
type DeliveryTracker struct {
	// Interval is the poll interval of an account whose youngest followed
	// email is fresh; it grows with that email's age, to a quarter of it,
	// up to maxPollBackoff times Interval.
	Interval time.Duration
	// Timeout is how long after its acceptance an email is followed.
	Timeout time.Duration
	// List starts reading the delivery events of the account s from since.
	List func(s mailer.Settings, since time.Time) DeliveryPages
	Log  logr.Logger

	mu       sync.Mutex
	accounts map[string]*account
	// byID finds a followed email's account, by Message-Id without brackets.
	byID map[string]*account
	// byObject finds an object's followed email, by kind/namespace/name.
	byObject map[string]string
	notify   map[string]chan event.GenericEvent
}

// account is one Mailgun account's followed emails and the state of its
// sweep through their events.
type account struct {
	settings mailer.Settings
	pending  map[string]*followed
	// pages continues a sweep whose last page was full; nil starts the
	// next sweep at resume, or at the oldest acceptance without an outcome.
	pages DeliveryPages
	// resume is the time of the last event a sweep cut short by a failed
	// read had reached.
	resume time.Time
	// last is when the last read started, next when the next one is due.
	last, next time.Time
}

type followed struct {
	kind       string
	key        types.NamespacedName
	acceptedAt time.Time
	delivery   mailer.Delivery
}

// Source is the event source that brings objects of kind back when news of
// their email's delivery arrives; call it once per kind, before Start.
func (t *DeliveryTracker) Source(kind string) source.Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.notify == nil {
		t.notify = map[string]chan event.GenericEvent{}
	}
	ch := make(chan event.GenericEvent, 256)
	t.notify[kind] = ch
	return source.Channel(ch, &handler.EnqueueRequestForObject{})
}

// Lookup reports what is known of the delivery of the email id, and
// whether it is followed.
func (t *DeliveryTracker) Lookup(id string) (mailer.Delivery, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id = strings.Trim(id, "<>")
	a, ok := t.byID[id]
	if !ok {
		return mailer.Delivery{}, false
	}
	return a.pending[id].delivery, true
}

// Follow starts following the email id of the object key of kind, accepted
// at acceptedAt and sent with settings s. An object follows one email: a
// resent one replaces the earlier.
func (t *DeliveryTracker) Follow(kind string, key types.NamespacedName, s mailer.Settings, id string, acceptedAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id = strings.Trim(id, "<>")
	if t.accounts == nil {
		t.accounts, t.byID, t.byObject = map[string]*account{}, map[string]*account{}, map[string]string{}
	}
	obj := kind + "/" + key.String()
	if old, ok := t.byObject[obj]; ok {
		t.stop(old)
	}
	fp := s.Events()
	a, ok := t.accounts[fp]
	if !ok {
		a = &account{settings: s, pending: map[string]*followed{}}
		t.accounts[fp] = a
	}
	a.pending[id] = &followed{kind: kind, key: key, acceptedAt: acceptedAt, delivery: mailer.Delivery{State: mailer.DeliveryPending}}
	t.byID[id] = a
	t.byObject[obj] = id
	// A new email is worth a read one interval after the last one, not
	// after the backoff of older emails.
	if due := a.last.Add(t.Interval); due.Before(a.next) {
		a.next = due
	}
}

// Stop stops following the email of the object key of kind.
func (t *DeliveryTracker) Stop(kind string, key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.byObject[kind+"/"+key.String()]; ok {
		t.stop(id)
	}
}

func (t *DeliveryTracker) stop(id string) {
	a, ok := t.byID[id]
	if !ok {
		return
	}
	f := a.pending[id]
	delete(t.byObject, f.kind+"/"+f.key.String())
	delete(t.byID, id)
	delete(a.pending, id)
	if len(a.pending) == 0 {
		delete(t.accounts, a.settings.Events())
	}
}

// Followed is how many emails are followed.
func (t *DeliveryTracker) Followed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// Start polls until ctx ends. It is a manager Runnable that needs the
// leader election: only the leader reconciles.
func (t *DeliveryTracker) Start(ctx context.Context) error {
	tick := time.NewTicker(min(t.Interval, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			t.pollDue(ctx, now)
		}
	}
}

// pollDue reads one page of events for each account whose poll is due at
// now, and brings back the objects whose email's delivery changed.
func (t *DeliveryTracker) pollDue(ctx context.Context, now time.Time) {
	for _, a := range t.due(now) {
		t.poll(ctx, a)
	}
}

// due returns the accounts to poll at now and schedules their next poll;
// it forgets the emails followed for longer than Timeout.
func (t *DeliveryTracker) due(now time.Time) []*account {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*account
	for fp, a := range t.accounts {
		youngest := time.Duration(1<<63 - 1)
		var oldest time.Time
		for id, f := range a.pending {
			if t.Timeout > 0 && now.Sub(f.acceptedAt) > t.Timeout {
				// Its object's reconcile says so in its condition.
				t.stop(id)
				continue
			}
			if _, final := deliveryOutcomes[f.delivery.State]; final {
				continue
			}
			youngest = min(youngest, now.Sub(f.acceptedAt))
			if oldest.IsZero() || f.acceptedAt.Before(oldest) {
				oldest = f.acceptedAt
			}
		}
		if oldest.IsZero() || now.Before(a.next) || t.accounts[fp] == nil {
			continue
		}
		a.last = now
		a.next = now.Add(min(max(youngest/4, t.Interval), maxPollBackoff*t.Interval))
		if a.pages == nil {
			since := oldest.Add(-clockSkew)
			if r := a.resume.Add(-clockSkew); r.After(since) {
				since = r
			}
			a.pages = t.List(a.settings, since)
		}
		out = append(out, a)
	}
	return out
}

// poll reads a's next pages, up to maxPagesPerPoll while they come full,
// and brings back the objects whose email's delivery changed.
func (t *DeliveryTracker) poll(ctx context.Context, a *account) {
	t.mu.Lock()
	pages := a.pages
	t.mu.Unlock()
	for range maxPagesPerPoll {
		outcomes, last, full, err := pages.Next(ctx)
		for _, n := range t.record(a, outcomes, last, full, err) {
			select {
			case n.ch <- event.GenericEvent{Object: n.obj}:
			case <-ctx.Done():
				return
			}
		}
		if !full || err != nil {
			return
		}
	}
}

type notification struct {
	ch  chan event.GenericEvent
	obj *metav1.PartialObjectMetadata
}

// record applies what a page of a's events said, and returns whom to tell.
func (t *DeliveryTracker) record(a *account, outcomes map[string]mailer.Delivery, last time.Time, full bool, err error) []notification {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		// The reader is spent; the next poll resumes where it was.
		a.pages = nil
	case full:
		// The sweep goes on where this page ended.
		a.resume = last
	default:
		// The sweep is done. The next starts over at the oldest
		// acceptance without an outcome: events lag, and some may have
		// shown behind this one.
		a.pages, a.resume = nil, time.Time{}
	}
	switch {
	case mailer.Deferred(err):
		t.Log.V(1).Info("Delivery poll deferred: sends come first", "domain", a.settings.Domain)
		return nil
	case err != nil:
		t.Log.Info("Could not read Mailgun's delivery events; will look again", "domain", a.settings.Domain, "error", err.Error(), "at", a.next)
		return nil
	}
	var out []notification
	for id, d := range outcomes {
		f, ok := a.pending[id]
		if !ok {
			continue
		}
		merged := f.delivery.Merge(d)
		if merged == f.delivery {
			continue
		}
		f.delivery = merged
		if ch, ok := t.notify[f.kind]; ok {
			out = append(out, notification{ch, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: f.key.Namespace, Name: f.key.Name}}})
		}
	}
	return out
}
