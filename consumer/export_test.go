package consumer

import "time"

// SetDurableCheckEvery makes a running consumer look at its durable often.
func SetDurableCheckEvery(d time.Duration) (restore func()) {
	was := durableCheckEvery
	durableCheckEvery = d
	return func() { durableCheckEvery = was }
}
