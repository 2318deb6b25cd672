package lru

import (
	"container/list"
	"sync"
)

// Cache holds at most Bound entries and, when a cost function is given,
// at most MaxCost total cost. It is safe for concurrent use. A zero or
// negative bound means one entry: a cache never grows without bound.
type Cache[K comparable, V any] struct {
	mu        sync.Mutex
	bound     int
	maxCost   int64
	costOf    func(K, V) int64
	cost      int64
	order     list.List // front: most recently used; values are *entry[K, V]
	items     map[K]*list.Element
	evictions int64
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

// New returns a cache of at most bound entries.
func New[K comparable, V any](bound int) *Cache[K, V] {
	return NewWeighted[K, V](bound, 0, nil)
}

// NewWeighted returns a cache of at most bound entries whose costs (as
// cost reports them, e.g. bytes) add up to at most maxCost; maxCost ≤ 0
// or a nil cost means no cost bound. An entry costlier than maxCost on
// its own is not kept.
func NewWeighted[K comparable, V any](bound int, maxCost int64, cost func(K, V) int64) *Cache[K, V] {
	if cost == nil {
		maxCost = 0
	}
	return &Cache[K, V]{bound: max(bound, 1), maxCost: maxCost, costOf: cost, items: map[K]*list.Element{}}
}

// Get returns the entry for k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Add stores v under k (replacing any entry) and evicts the least
// recently used entries beyond the bounds.
func (c *Cache[K, V]) Add(k K, v V) {
	var cost int64
	if c.maxCost > 0 {
		cost = c.costOf(k, v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	if c.maxCost > 0 && cost > c.maxCost {
		return
	}
	c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, cost: cost})
	c.cost += cost
	for len(c.items) > c.bound || (c.maxCost > 0 && c.cost > c.maxCost) {
		c.remove(c.order.Back())
		c.evictions++
	}
}

// Remove drops the entry for k, if any (not counted as an eviction).
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
}

func (c *Cache[K, V]) remove(el *list.Element) {
	e := c.order.Remove(el).(*entry[K, V])
	delete(c.items, e.key)
	c.cost -= e.cost
}

// Stats is a cache's figures at one instant.
type Stats struct {
	Entries   int
	Bound     int
	Evictions int64 // entries dropped to stay within the bounds, since New
}

// Stats returns the cache's figures.
func (c *Cache[K, V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Entries: len(c.items), Bound: c.bound, Evictions: c.evictions}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
