package lru

import "testing"

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[int, string](2)
	c.Add(1, "a")
	c.Add(2, "b")
	if _, ok := c.Get(1); !ok { // 1 is now the most recent
		t.Fatal("1 missing")
	}
	c.Add(3, "c")
	if _, ok := c.Get(2); ok {
		t.Error("2 should have been evicted")
	}
	for _, k := range []int{1, 3} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%d missing", k)
		}
	}
	if s := c.Stats(); s.Entries != 2 || s.Bound != 2 || s.Evictions != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestCostBound(t *testing.T) {
	c := NewWeighted[string, string](100, 10, func(k, v string) int64 { return int64(len(k) + len(v)) })
	c.Add("a", "1234") // 5
	c.Add("b", "1234") // 10
	c.Add("c", "1234") // 15: a goes
	if _, ok := c.Get("a"); ok {
		t.Error("a should have been evicted by cost")
	}
	c.Add("huge", "12345678901") // costlier than the whole bound: not kept, nothing evicted for it
	if _, ok := c.Get("huge"); ok {
		t.Error("an entry over the cost bound was kept")
	}
	if s := c.Stats(); s.Entries != 2 || s.Evictions != 1 {
		t.Errorf("stats %+v", s)
	}
	c.Add("b", "1")  // replacing frees the old cost
	c.Add("d", "12") // 2 + 5 + 3 = 10: fits
	if s := c.Stats(); s.Entries != 3 {
		t.Errorf("stats %+v after replace", s)
	}
}

func TestZeroBoundKeepsOne(t *testing.T) {
	c := New[int, int](0)
	c.Add(1, 1)
	c.Add(2, 2)
	if c.Len() != 1 {
		t.Fatalf("len %d", c.Len())
	}
}

func TestRemoveIsNotAnEviction(t *testing.T) {
	c := NewWeighted[string, string](4, 10, func(k, v string) int64 { return int64(len(v)) })
	c.Add("a", "12345")
	c.Remove("a")
	c.Remove("nothing")
	c.Add("b", "1234567890") // fits: a's cost was given back
	if s := c.Stats(); s.Entries != 1 || s.Evictions != 0 {
		t.Fatalf("stats %+v", s)
	}
}
