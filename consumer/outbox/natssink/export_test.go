package natssink

import "time"

// SetWindowRefresh makes tests see a changed duplicate window at once.
func SetWindowRefresh(d time.Duration) (restore func()) {
	was := windowRefresh
	windowRefresh = d
	return func() { windowRefresh = was }
}
