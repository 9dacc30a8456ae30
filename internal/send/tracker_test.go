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
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// page is one scripted answer of scriptedPages.
type page struct {
	outcomes map[string]mailer.Delivery
	last     time.Time
	full     bool
	err      error
}

// scriptedPages answers Next with its pages in turn, then empty ones.
type scriptedPages struct {
	pages []page
	reads *int
}

func (p *scriptedPages) Next(context.Context) (map[string]mailer.Delivery, time.Time, bool, error) {
	*p.reads++
	if len(p.pages) == 0 {
		return nil, time.Time{}, false, nil
	}
	next := p.pages[0]
	p.pages = p.pages[1:]
	return next.outcomes, next.last, next.full, next.err
}

// TestDeliveryTrackingReadsOnePagePerAccount: however many emails are
// followed, a poll reads one page of events per recipient and domain,
// starting at the oldest acceptance without an outcome, and more pages
// (a bounded number) only while they come full; a sweep cut short by a
// failed read resumes where it was; news brings back exactly the objects
// it is about; polls slow down as the youngest email ages, stop when
// nothing without an outcome is followed, and emails are forgotten after
// the timeout.
func TestDeliveryTrackingReadsOnePagePerAccount(t *testing.T) {
	const kind = "MailgunCluster"
	start := time.Now()
	accountA := mailer.Settings{Domain: "a.example.com", APIKey: "key-a", Recipient: "ops@example.com", APIBase: "https://api.mailgun.net/v3"}
	accountB := mailer.Settings{Domain: "b.example.com", APIKey: "key-b", Recipient: "ops@example.com", APIBase: "https://api.mailgun.net/v3"}
	reads := 0
	var lists []string
	scripts := map[string][]page{
		// A full page, then the rest: read in one poll.
		accountA.Domain: {
			{outcomes: map[string]mailer.Delivery{"a-1@x": {State: mailer.Delivered, At: start}, "unknown@x": {State: mailer.Delivered, At: start}}, last: start, full: true},
			{outcomes: map[string]mailer.Delivery{"a-2@x": {State: mailer.DeliveryFailed, Detail: "550", At: start}}, last: start},
		},
		accountB.Domain: {{outcomes: map[string]mailer.Delivery{"b-0@x": {State: mailer.DeliveryRetrying, Detail: "421", At: start}}, last: start}},
	}
	tr := &DeliveryTracker{
		Interval: 15 * time.Second,
		Timeout:  12 * time.Hour,
		Log:      logr.Discard(),
		List: func(s mailer.Settings, since time.Time) DeliveryPages {
			lists = append(lists, fmt.Sprintf("%s since %s", s.Domain, since.Format(time.RFC3339)))
			p := &scriptedPages{pages: scripts[s.Domain], reads: &reads}
			scripts[s.Domain] = nil
			return p
		},
	}
	tr.Source(kind)
	news := tr.notify[kind]
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	oldest := start.Add(-time.Minute)
	for i := range 500 {
		tr.Follow(kind, key(fmt.Sprintf("a-%d", i)), accountA, fmt.Sprintf("<a-%d@x>", i), oldest.Add(time.Duration(i)*time.Millisecond))
	}
	tr.Follow(kind, key("b-0"), accountB, "<b-0@x>", start)
	tr.Follow(kind, key("b-1"), accountB, "<b-1@x>", start)

	ctx := context.Background()
	tr.pollDue(ctx, start)
	if reads != 3 || len(lists) != 2 {
		t.Fatalf("one poll of 502 emails in 2 accounts read %d pages in %d sweeps, want 3 (a full page and the next for a, one for b) in 2", reads, len(lists))
	}
	wantSince := oldest.Add(-clockSkew).Format(time.RFC3339)
	if !slices.Contains(lists, "a.example.com since "+wantSince) {
		t.Errorf("sweeps %v, want account a's to start at %s", lists, wantSince)
	}
	got := map[string]bool{}
	for len(news) > 0 {
		got[(<-news).Object.GetName()] = true
	}
	if len(got) != 3 || !got["a-1"] || !got["a-2"] || !got["b-0"] {
		t.Errorf("news brought back %v, want a-1, a-2 and b-0", got)
	}
	if d, ok := tr.Lookup("<a-1@x>"); !ok || d.State != mailer.Delivered {
		t.Errorf("Lookup(a-1) = %v, %v; want Delivered", d, ok)
	}
	if d, ok := tr.Lookup("<a-7@x>"); !ok || d.State != mailer.DeliveryPending {
		t.Errorf("Lookup(a-7) = %v, %v; want followed, Pending", d, ok)
	}

	// Not due yet, even for an email accepted since.
	tr.Follow(kind, key("b-2"), accountB, "<b-2@x>", start.Add(time.Second))
	tr.pollDue(ctx, start.Add(time.Second))
	if reads != 3 {
		t.Errorf("a poll before the interval read %d pages, want none", reads-3)
	}

	// Account a's next sweep starts at its oldest email without an
	// outcome (a-0; a-1 and a-2 have theirs), and fails after a full page:
	// the sweep after it resumes at that page's last event.
	resumeAt := start.Add(10 * time.Second)
	scripts[accountA.Domain] = []page{{last: resumeAt, full: true}, {err: errors.New("connection reset")}}
	lists = nil
	tr.pollDue(ctx, start.Add(15*time.Second))
	tr.pollDue(ctx, start.Add(time.Minute))
	wantResume := "a.example.com since " + resumeAt.Add(-clockSkew).Format(time.RFC3339)
	if !slices.Contains(lists, wantResume) || !slices.Contains(lists, "a.example.com since "+wantSince) {
		t.Errorf("sweeps %v, want a's to start at %s, and after the failed read to resume at %s", lists, wantSince, wantResume)
	}

	// Emails with an outcome are not swept for: nothing else followed in
	// account a means no read for it.
	for i := range 500 {
		if i != 1 {
			tr.Stop(kind, key(fmt.Sprintf("a-%d", i)))
		}
	}
	for _, name := range []string{"b-0", "b-1", "b-2"} {
		tr.Stop(kind, key(name))
	}
	reads = 0
	tr.pollDue(ctx, start.Add(time.Hour))
	if reads != 0 {
		t.Errorf("%d pages read for an account whose only email has its outcome, want none", reads)
	}
	tr.Stop(kind, key("a-1"))

	// The youngest email followed is half an hour old: polls come every
	// quarter of its age.
	tr.Follow(kind, key("old"), accountA, "<old@x>", start.Add(-30*time.Minute))
	reads = 0
	for _, at := range []time.Duration{time.Minute, 8 * time.Minute, 9 * time.Minute} {
		tr.pollDue(ctx, start.Add(at))
	}
	if reads != 2 {
		t.Errorf("%d pages read in 8 minutes for an email half an hour old, want 2 (every quarter of its age)", reads)
	}
	// Past the timeout, the tracker forgets it by itself.
	reads = 0
	tr.pollDue(ctx, start.Add(13*time.Hour))
	if tr.Followed() != 0 || reads != 0 {
		t.Errorf("%d emails followed and %d pages read past the timeout, want none", tr.Followed(), reads)
	}
}
