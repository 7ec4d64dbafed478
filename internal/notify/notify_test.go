package notify

import (
	"slices"
	"sync"
	"testing"
)

func TestSetCoalescesAndKeepsOrder(t *testing.T) {
	s := NewSet[string]()
	for _, k := range []string{"b", "a", "b", "c", "a"} {
		s.Add(k)
	}
	select {
	case <-s.Ready():
	default:
		t.Fatal("Ready is not readable after Add")
	}
	if got := s.Take(); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("Take = %v, want [b a c]", got)
	}
	if got := s.Take(); len(got) != 0 {
		t.Fatalf("second Take = %v, want nothing", got)
	}
}

func TestSetNeverDropsUnderConcurrentAdds(t *testing.T) {
	s := NewSet[int]()
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				s.Add(p*1000 + i)
			}
		}()
	}
	seen := map[int]bool{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-s.Ready():
			for _, k := range s.Take() {
				seen[k] = true
			}
			continue
		case <-done:
		}
		break
	}
	for _, k := range s.Take() {
		seen[k] = true
	}
	if len(seen) != 8000 {
		t.Fatalf("took %d distinct keys, want 8000", len(seen))
	}
}
