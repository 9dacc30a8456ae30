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
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// scriptedPages answers Next with its pages in turn, then empty ones.
type scriptedPages struct {
	pages []map[string]mailer.Delivery
	reads *int
}

func (p *scriptedPages) Next(context.Context) (map[string]mailer.Delivery, bool, error) {
	*p.reads++
	if len(p.pages) == 0 {
		return nil, false, nil
	}
	page := p.pages[0]
	p.pages = p.pages[1:]
	return page, len(p.pages) > 0, nil
}

// TestDeliveryTrackingReadsOnePagePerAccount: however many emails are
// followed, a poll reads one page of events per Mailgun account, starting
// at the oldest pending acceptance; a full page is continued at the next
// poll instead of starting over; news brings back exactly the objects it
// is about; polls slow down as the youngest email ages, and stop when
// nothing is followed.
func TestDeliveryTrackingReadsOnePagePerAccount(t *testing.T) {
	const kind = "MailgunCluster"
	start := time.Now()
	accountA := mailer.Settings{Domain: "a.example.com", APIKey: "key-a", APIBase: "https://api.mailgun.net/v3"}
	accountB := mailer.Settings{Domain: "b.example.com", APIKey: "key-b", APIBase: "https://api.mailgun.net/v3"}
	reads := 0
	var lists []string
	scripts := map[string][]map[string]mailer.Delivery{
		// Two pages: the sweep of A is continued, not restarted.
		accountA.Domain: {
			{"a-1@x": {State: mailer.Delivered, At: start}, "unknown@x": {State: mailer.Delivered, At: start}},
			{"a-2@x": {State: mailer.DeliveryFailed, Detail: "550", At: start}},
		},
		accountB.Domain: {{"b-0@x": {State: mailer.DeliveryRetrying, Detail: "421", At: start}}},
	}
	tr := &DeliveryTracker{
		Interval: 15 * time.Second,
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
	if reads != 2 || len(lists) != 2 {
		t.Fatalf("one poll of 502 emails in 2 accounts read %d pages in %d listings, want 2 and 2", reads, len(lists))
	}
	wantSince := oldest.Add(-clockSkew).Format(time.RFC3339)
	if lists[0] != "a.example.com since "+wantSince && lists[1] != "a.example.com since "+wantSince {
		t.Errorf("listings %v, want account a's to start at %s", lists, wantSince)
	}
	got := map[string]bool{}
	for len(news) > 0 {
		got[(<-news).Object.GetName()] = true
	}
	if len(got) != 2 || !got["a-1"] || !got["b-0"] {
		t.Errorf("news brought back %v, want a-1 and b-0", got)
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
	if reads != 2 {
		t.Errorf("a poll before the interval read %d pages, want none", reads-2)
	}
	// Due: A continues its sweep with the page after the full one; B
	// starts over at its oldest pending acceptance.
	tr.pollDue(ctx, start.Add(15*time.Second))
	if reads != 4 || len(lists) != 3 {
		t.Errorf("the second poll read %d pages in %d new listings, want 2 in 1 (account b's)", reads-2, len(lists)-2)
	}
	if d, _ := tr.Lookup("<a-2@x>"); d.State != mailer.DeliveryFailed {
		t.Errorf("Lookup(a-2) = %v; want Failed, from the continued sweep", d)
	}

	// The youngest email followed is half an hour old: polls come every
	// quarter of its age.
	for _, name := range []string{"b-0", "b-1", "b-2"} {
		tr.Stop(kind, key(name))
	}
	for i := range 500 {
		tr.Stop(kind, key(fmt.Sprintf("a-%d", i)))
	}
	tr.Follow(kind, key("old"), accountA, "<old@x>", start.Add(-30*time.Minute))
	reads = 0
	for _, at := range []time.Duration{time.Minute, 8 * time.Minute, 9 * time.Minute} {
		tr.pollDue(ctx, start.Add(at))
	}
	if reads != 2 {
		t.Errorf("%d pages read in 8 minutes for an email half an hour old, want 2 (every quarter of its age)", reads)
	}
	tr.Stop(kind, key("old"))
	if tr.Followed() != 0 {
		t.Fatalf("%d emails followed after all were stopped", tr.Followed())
	}
	reads = 0
	tr.pollDue(ctx, start.Add(24*time.Hour))
	if reads != 0 {
		t.Errorf("%d pages read with nothing followed, want none", reads)
	}
}
