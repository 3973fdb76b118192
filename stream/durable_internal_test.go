package stream

import "testing"

// Two sites' copies never share a consumer family, however '_' falls in
// their names: EnsureHubConsumer deletes the family's other consumers.
func TestCopyFamiliesDoNotCollide(t *testing.T) {
	a, b := newCopySource("ORDERS", "hub", "a", "b_c"), newCopySource("ORDERS", "hub", "a_b", "c")
	if copyFamily(a) == copyFamily(b) {
		t.Fatalf("site a's copy b_c and site a_b's copy c share the family %q", copyFamily(a))
	}
	again := newCopySource("ORDERS", "hub", "a", "b_c")
	if copyFamily(again) != copyFamily(a) || again.Consumer.Name == a.Consumer.Name || again.Consumer.DeliverSubject == a.Consumer.DeliverSubject {
		t.Fatalf("a copy made again: %+v against %+v; want the same family, another consumer and deliver subject", again.Consumer, a.Consumer)
	}
}
