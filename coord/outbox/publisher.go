package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Publisher delivers a message to the outside world. Publish returns nil
// once the message is accepted; the relay retries on an error, so a message
// may be published more than once and consumers deduplicate by Message.ID.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// MemoryPublisher keeps published messages in memory, in publication order;
// for tests and for in-process consumers.
type MemoryPublisher struct {
	mu       sync.Mutex
	messages []Message
	notify   chan struct{}
}

// NewMemoryPublisher returns an empty MemoryPublisher.
func NewMemoryPublisher() *MemoryPublisher { return &MemoryPublisher{notify: make(chan struct{})} }

// Publish records m.
func (p *MemoryPublisher) Publish(_ context.Context, m Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages = append(p.messages, m)
	close(p.notify)
	p.notify = make(chan struct{})
	return nil
}

// Messages returns the messages published so far, duplicates included.
func (p *MemoryPublisher) Messages() []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Message(nil), p.messages...)
}

// Wait blocks until at least n messages were published or ctx ends.
func (p *MemoryPublisher) Wait(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		got, ch := len(p.messages), p.notify
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("outbox: %d of %d messages published: %w", got, n, ctx.Err())
		}
	}
}

// WebhookPublisher POSTs each message as JSON to a URL. The request carries
// the message id in the Idempotency-Key header; any 2xx answer is success.
type WebhookPublisher struct {
	// URL receives the POSTs.
	URL string
	// Client sends them; nil means http.DefaultClient.
	Client *http.Client
	// Header is added to every request (for example Authorization).
	Header http.Header
}

// Publish POSTs m.
func (p *WebhookPublisher) Publish(ctx context.Context, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range p.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("outbox: webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("outbox: webhook answered %s", resp.Status)
	}
	return nil
}
