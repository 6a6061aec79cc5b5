package lock

import "time"

// HeldUntil is until when h believes its lease surely held (the local
// clock's reading at which it would give the lock up unrenewed).
func HeldUntil(h *Lock) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.valid
}
