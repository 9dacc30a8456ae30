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

// Package mailgunfake is a loopback stand-in for the parts of the Mailgun
// API the provider uses: sending messages and listing events. It checks
// authentication and the domain like Mailgun does, records every message
// with all its fields, and can inject failures: error answers, hangs, and
// messages accepted whose reply is lost.
//
// The tests use it, and so does the demo when no Mailgun credentials are
// given. It never listens on anything but loopback.
package mailgunfake

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Message is a message the fake accepted.
type Message struct {
	ID        string // with angle brackets, as returned to the client
	Domain    string
	From      string
	To        []string
	Subject   string
	Text      string
	ReplyTo   string
	Headers   map[string]string // h:<name> fields
	Variables map[string]string // v:<name> fields
	Accepted  time.Time
}

// Event is a delivery event the fake reports for a message, after the
// "accepted" event every accepted message has.
type Event struct {
	// Name is a Mailgun event name: delivered, failed, rejected, complained.
	Name string
	// Severity is "permanent" or "temporary", for failed events.
	Severity string
	// Reason is Mailgun's short reason, e.g. "bounce" or "suppress-bounce".
	Reason string
	// Message is the receiving server's answer, e.g. "550 5.1.1 no such user".
	Message string
	// Code is the SMTP code of a failed delivery.
	Code int
	// at is when AddEvent added it: its timestamp.
	at time.Time
}

// FaultKind is a kind of injected failure.
type FaultKind int

const (
	// Status answers with Fault.Status, Fault.Body and Fault.Header.
	Status FaultKind = iota + 1
	// Hang never answers; the client times out. Nothing is recorded.
	Hang
	// AcceptAndDropReply records the message, then closes the connection
	// without answering, like a reply lost on the way back.
	AcceptAndDropReply
	// AcceptAndHang records the message, then never answers, like a sender
	// that dies before the reply arrives.
	AcceptAndHang
	// AcceptAndFail records the message, then answers with Fault.Status and
	// Fault.Body: Mailgun documents that a 5xx does not mean the message
	// was not queued.
	AcceptAndFail
)

// Fault is one injected failure.
type Fault struct {
	Kind   FaultKind
	Status int
	Body   string
	Header http.Header
}

// StatusFault answers with the given status and Mailgun-style JSON body.
func StatusFault(status int, message string) Fault {
	b, _ := json.Marshal(map[string]string{"message": message})
	return Fault{Kind: Status, Status: status, Body: string(b)}
}

// Server is the fake Mailgun API.
type Server struct {
	Domain string
	APIKey string

	srv      *httptest.Server
	listener *gatedListener
	// connections counts the TCP connections clients opened.
	connections atomic.Int64

	mu sync.Mutex
	// authorizedRecipients, if non-nil, makes the domain behave like a
	// sandbox domain: other recipients get 403.
	authorizedRecipients map[string]bool
	sendFaults           []Fault
	eventFaults          []Fault
	faultFunc            func(endpoint string) *Fault
	messages             []Message
	events               map[string][]Event // by message ID without brackets
	domainState          string
	eventLag             time.Duration
	autoDeliver          bool
	sendLatency          time.Duration
	sendRequests         int
	eventRequests        int
	domainRequests       int
	eventRequestsFor     map[string]int
	hang                 chan struct{}
}

// Start starts a fake for the given domain and API key on a loopback port.
func Start(domain, apiKey string) *Server {
	s := &Server{Domain: domain, APIKey: apiKey, hang: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.listener = newGatedListener(s.srv.Listener)
	s.srv.Listener = s.listener
	s.srv.Config.ConnState = s.countConnections
	s.srv.Start()
	return s
}

// StartTLSOn is Start serving HTTPS with the given certificate on a given
// address: a loopback one, or an address of this machine's own interfaces
// such as the test node's bridge, where the node's pods reach it (e.g.
// "10.244.0.1:0"). The operator talks plain HTTP only to loopback.
func StartTLSOn(addr, domain, apiKey string, cert tls.Certificate) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ok, err := isLocalAddress(host)
	if err != nil {
		return nil, fmt.Errorf("the fake only listens on this machine's own addresses, not %q: %w", addr, err)
	}
	if !ok {
		return nil, fmt.Errorf("the fake only listens on this machine's own addresses, not %q", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Domain: domain, APIKey: apiKey, hang: make(chan struct{}), listener: newGatedListener(l)}
	s.srv = &httptest.Server{Listener: s.listener, Config: &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second,
		ConnState: s.countConnections}}
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.StartTLS()
	return s, nil
}

// APIBase is the base URL to configure the client with (MAILGUN_API_BASE).
func (s *Server) APIBase() string { return s.srv.URL + "/v3" }

// isLocalAddress says whether host is a loopback address or one assigned to
// an interface of this machine.
func isLocalAddress(host string) (bool, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return false, fmt.Errorf("not an IP address")
	}
	if ip.IsLoopback() {
		return true, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true, nil
		}
	}
	return false, nil
}

// Close stops the server, releasing hanging requests.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.hang:
	default:
		close(s.hang)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// AuthorizeRecipients turns the domain into a sandbox domain that only
// sends to the given recipients.
func (s *Server) AuthorizeRecipients(recipients ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorizedRecipients = map[string]bool{}
	for _, r := range recipients {
		s.authorizedRecipients[strings.ToLower(r)] = true
	}
}

// SetSendLatency makes every send take at least d, like the real API.
func (s *Server) SetSendLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLatency = d
}

// FailSends queues faults for the next send requests, one per request.
func (s *Server) FailSends(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendFaults = append(s.sendFaults, faults...)
}

// FailEvents queues faults for the next events requests, one per request.
func (s *Server) FailEvents(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventFaults = append(s.eventFaults, faults...)
}

// SetFaultFunc installs f, consulted for every request after the queued
// faults are used up; endpoint is "messages", "events" or "domains" (the
// credential checks). Returning nil serves the request normally. f must be
// safe for concurrent use.
func (s *Server) SetFaultFunc(f func(endpoint string) *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultFunc = f
}

// RefuseConnections stops (on) or resumes (off) listening on the fake's
// address: while refusing, every call fails with "connection refused",
// and the connections clients keep open are closed.
func (s *Server) RefuseConnections(on bool) error {
	if err := s.listener.refuse(on); err != nil {
		return err
	}
	if on {
		s.srv.CloseClientConnections()
		// Give clients' idle connections time to see the close: one
		// reused just before would fail as a reset (outcome unknown), not
		// as a refusal.
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// SetEventLag makes events show only d after the message was accepted:
// Mailgun's events lag, by seconds usually and by up to about half an hour
// (its event-polling guide treats only older events as complete).
func (s *Server) SetEventLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventLag = d
}

// AddEvent appends a delivery event for the message with the given ID,
// timestamped now.
func (s *Server) AddEvent(messageID string, e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = map[string][]Event{}
	}
	id := strings.Trim(messageID, "<>")
	e.at = time.Now()
	s.events[id] = append(s.events[id], e)
}

// SetAutoDeliver makes every accepted message also have a "delivered"
// event, a millisecond after its acceptance (and lagging like the rest).
func (s *Server) SetAutoDeliver(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoDeliver = on
}

// SetDomainState sets the state the domain API reports ("active" by
// default; "unverified" for a domain whose DNS is not set up).
func (s *Server) SetDomainState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domainState = state
}

// Messages returns the accepted messages, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// MessagesWithVariable returns the accepted messages whose user variable
// name ("v:<name>") has the given value, oldest first.
func (s *Server) MessagesWithVariable(name, value string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		if m.Variables[name] == value {
			out = append(out, m)
		}
	}
	return out
}

func (s *Server) countConnections(_ net.Conn, state http.ConnState) {
	if state == http.StateNew {
		s.connections.Add(1)
	}
}

// Connections returns how many TCP connections clients have opened.
func (s *Server) Connections() int { return int(s.connections.Load()) }

// Requests returns how many send and events requests arrived.
func (s *Server) Requests() (sends, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendRequests, s.eventRequests
}

// EventRequestsFor returns how many events requests asked for messageID.
func (s *Server) EventRequestsFor(messageID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eventRequestsFor[strings.Trim(messageID, "<>")]
}

// DomainRequests returns how many domain lookups (credential checks)
// arrived.
func (s *Server) DomainRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.domainRequests
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Mailgun answers a wrong key with 401 and a plain "Forbidden".
	user, pass, ok := r.BasicAuth()
	if !ok || user != "api" || pass != s.APIKey {
		http.Error(w, "Forbidden", http.StatusUnauthorized)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) == 3 && parts[0] == "v3" && parts[1] == "domains" && r.Method == http.MethodGet {
		// An outage takes the domain lookups down too; only answers
		// (Status, Hang) apply to them.
		if fault := s.nextFault("domains"); fault != nil && s.answerFault(w, r, fault) {
			return
		}
		s.serveDomain(w, parts[2])
		return
	}
	if len(parts) != 3 || parts[0] != "v3" {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "not found"})
		return
	}
	domain, endpoint := parts[1], parts[2]
	if domain != s.Domain {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Domain not found: " + domain})
		return
	}
	switch {
	case endpoint == "messages" && r.Method == http.MethodPost:
		s.serveSend(w, r)
	case endpoint == "events" && r.Method == http.MethodGet:
		s.serveEvents(w, r)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "not found"})
	}
}

// nextFault takes the next fault for endpoint, counting the request.
func (s *Server) nextFault(endpoint string) *Fault {
	s.mu.Lock()
	var queue *[]Fault
	switch endpoint {
	case "events":
		queue = &s.eventFaults
		s.eventRequests++
	case "domains":
		// Domain lookups take faults from the fault function only.
		s.domainRequests++
	default:
		queue = &s.sendFaults
		s.sendRequests++
	}
	if queue != nil && len(*queue) > 0 {
		f := (*queue)[0]
		*queue = (*queue)[1:]
		s.mu.Unlock()
		return &f
	}
	ff := s.faultFunc
	s.mu.Unlock()
	if ff != nil {
		return ff(endpoint)
	}
	return nil
}

// answerFault serves a Status or Hang fault; it reports false for faults
// the caller handles.
func (s *Server) answerFault(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	switch f.Kind {
	case Status:
		writeFault(w, f)
		return true
	case Hang:
		s.hangUp(r)
		return true
	}
	return false
}

// writeFault answers with the fault's status, headers and body.
func writeFault(w http.ResponseWriter, f *Fault) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte(f.Body))
}

// hangUp blocks until the client gives up or the server closes.
func (s *Server) hangUp(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.hang:
	case <-time.After(5 * time.Minute):
	}
}

func (s *Server) serveSend(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	latency := s.sendLatency
	s.mu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	fault := s.nextFault("messages")
	if fault != nil && s.answerFault(w, r, fault) {
		return
	}
	// Mailgun takes messages of up to 25 MB; so does the fake, and parsing
	// a larger body fails instead of filling memory or disk.
	r.Body = http.MaxBytesReader(w, r.Body, 25<<20)
	//nolint:gosec // G120: the body is capped by http.MaxBytesReader above; gosec's taint check cannot see that (securego/gosec G120 samples)
	if err := r.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "malformed form: " + err.Error()})
		return
	}
	if r.MultipartForm == nil {
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "malformed form: " + err.Error()})
			return
		}
	}
	form := r.PostForm
	if r.MultipartForm != nil {
		form = r.MultipartForm.Value
	}
	msg := Message{
		Domain:    s.Domain,
		From:      first(form["from"]),
		To:        form["to"],
		Subject:   first(form["subject"]),
		Text:      first(form["text"]),
		Headers:   map[string]string{},
		Variables: map[string]string{},
		Accepted:  time.Now(),
	}
	for k, v := range form {
		switch {
		case strings.HasPrefix(k, "h:"):
			msg.Headers[strings.TrimPrefix(k, "h:")] = first(v)
		case strings.HasPrefix(k, "v:"):
			msg.Variables[strings.TrimPrefix(k, "v:")] = first(v)
		}
	}
	msg.ReplyTo = msg.Headers["Reply-To"]
	switch {
	case msg.From == "":
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "from parameter is missing"})
		return
	case len(msg.To) == 0:
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "to parameter is missing"})
		return
	case msg.Subject == "":
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "subject parameter is missing"})
		return
	case msg.Text == "" && first(form["html"]) == "":
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Need at least one of 'text' or 'html' parameters specified"})
		return
	}
	s.mu.Lock()
	if s.authorizedRecipients != nil {
		for _, to := range msg.To {
			if !s.authorizedRecipients[strings.ToLower(to)] {
				s.mu.Unlock()
				writeJSON(w, http.StatusForbidden, map[string]string{"message": "Domain " + s.Domain +
					" is not allowed to send: Free accounts are for test purposes only. Please upgrade or add the address to authorized recipients in Account Settings."})
				return
			}
		}
	}
	msg.ID = msg.Headers["Message-Id"]
	if msg.ID == "" {
		msg.ID = fmt.Sprintf("<%s.%s@%s>", time.Now().UTC().Format("20060102150405"), randomHex(8), s.Domain)
	} else if !strings.HasPrefix(msg.ID, "<") {
		msg.ID = "<" + msg.ID + ">"
	}
	s.messages = append(s.messages, msg)
	s.mu.Unlock()

	if fault != nil {
		switch fault.Kind {
		case AcceptAndDropReply:
			dropConnection(w)
			return
		case AcceptAndHang:
			s.hangUp(r)
			return
		case AcceptAndFail:
			writeFault(w, fault)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": msg.ID, "message": "Queued. Thank you."})
}

func (s *Server) serveDomain(w http.ResponseWriter, name string) {
	if name != s.Domain {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Domain not found"})
		return
	}
	s.mu.Lock()
	state := s.domainState
	s.mu.Unlock()
	if state == "" {
		state = "active"
	}
	writeJSON(w, http.StatusOK, map[string]any{"domain": map[string]any{"name": name, "state": state}})
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if id := strings.Trim(r.URL.Query().Get("message-id"), "<>"); id != "" {
		s.mu.Lock()
		if s.eventRequestsFor == nil {
			s.eventRequestsFor = map[string]int{}
		}
		s.eventRequestsFor[id]++
		s.mu.Unlock()
	}
	if fault := s.nextFault("events"); fault != nil {
		if s.answerFault(w, r, fault) {
			return
		}
		if fault.Kind == AcceptAndDropReply {
			dropConnection(w)
			return
		}
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 300 {
		limit = 100
	}
	offset, _ := strconv.Atoi(q.Get("fake-offset"))
	var begin time.Time
	if b := q.Get("begin"); b != "" {
		t, err := time.Parse(mailgunTime, b)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "invalid begin: " + b})
			return
		}
		begin = t
	}
	var names map[string]bool
	if f := q.Get("event"); f != "" {
		names = map[string]bool{}
		for _, n := range strings.Split(f, " OR ") {
			names[strings.TrimSpace(n)] = true
		}
	}
	matching := s.eventsSince(strings.Trim(q.Get("message-id"), "<>"), q.Get("recipient"), begin, names)
	page := matching[min(offset, len(matching)):min(offset+limit, len(matching))]
	items := make([]any, 0, len(page))
	for _, e := range page {
		items = append(items, e.item)
	}
	// The next page continues after this one; past the end it is empty
	// until more events show.
	next := *r.URL
	nq := next.Query()
	nq.Set("fake-offset", strconv.Itoa(offset+len(page)))
	next.RawQuery = nq.Encode()
	next.Scheme, next.Host = "http", r.Host
	if r.TLS != nil {
		next.Scheme = "https"
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "paging": map[string]string{"next": next.String()}})
}

// mailgunTime is how the events API writes begin and end.
const mailgunTime = "Mon, 2 Jan 2006 15:04:05 -0700"

type timedEvent struct {
	at   time.Time
	item map[string]any
}

// eventsSince returns the visible events (older than the event lag) from
// begin on, oldest first: of the message wantID only if set, to recipient
// only if set, and with one of names only if set.
func (s *Server) eventsSince(wantID, recipient string, begin time.Time, names map[string]bool) []timedEvent {
	s.mu.Lock()
	visible := time.Now().Add(-s.eventLag)
	autoDeliver := s.autoDeliver
	extra := map[string][]Event{}
	for id, evs := range s.events {
		extra[id] = append([]Event(nil), evs...)
	}
	s.mu.Unlock()
	var out []timedEvent
	add := func(at time.Time, name string, item func() map[string]any) {
		if at.After(visible) || at.Before(begin) || (names != nil && !names[name]) {
			return
		}
		out = append(out, timedEvent{at: at, item: item()})
	}
	for _, m := range s.Messages() {
		id := strings.Trim(m.ID, "<>")
		if wantID != "" && id != wantID {
			continue
		}
		for _, to := range m.To {
			if recipient != "" && to != recipient {
				continue
			}
			add(m.Accepted, "accepted", func() map[string]any { return s.event("accepted", m, id, to, m.Accepted, nil) })
			if autoDeliver {
				at := m.Accepted.Add(time.Millisecond)
				add(at, "delivered", func() map[string]any {
					return s.event("delivered", m, id, to, at, map[string]any{"delivery-status": map[string]any{"code": 250, "message": "OK"}})
				})
			}
			for _, e := range extra[id] {
				add(e.at, e.Name, func() map[string]any { return s.event(e.Name, m, id, to, e.at, e.fields()) })
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// fields are the event's fields Mailgun adds for its kind.
func (e Event) fields() map[string]any {
	switch e.Name {
	case "failed":
		return map[string]any{"severity": e.Severity, "reason": e.Reason,
			"delivery-status": map[string]any{"code": e.Code, "message": e.Message, "description": e.Message}}
	case "rejected":
		return map[string]any{"reject": map[string]any{"reason": e.Reason, "description": e.Message}}
	case "delivered":
		return map[string]any{"delivery-status": map[string]any{"code": 250, "message": e.Message}}
	}
	return nil
}

func (s *Server) event(name string, m Message, id, to string, at time.Time, fields map[string]any) map[string]any {
	e := map[string]any{
		"event":          name,
		"id":             randomHex(11),
		"timestamp":      float64(at.UnixNano()) / 1e9,
		"recipient":      to,
		"user-variables": m.Variables,
		"message": map[string]any{
			"headers": map[string]string{"message-id": id, "to": to, "from": m.From, "subject": m.Subject},
		},
	}
	for k, v := range fields {
		e[k] = v
	}
	return e
}

func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("mailgunfake: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
