/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cloud

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// UnavailableTTL is how long an offering that ran out of capacity is avoided.
const UnavailableTTL = 3 * time.Minute

// UnavailableOfferings remembers (instance type, zone, capacity type) offerings that recently failed for lack of
// capacity (InsufficientInstanceCapacity and friends, or a spot interruption), for UnavailableTTL.
type UnavailableOfferings struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	until map[string]time.Time
}

// NewUnavailableOfferings returns an empty cache on clk.
func NewUnavailableOfferings(clk clock.PassiveClock) *UnavailableOfferings {
	return &UnavailableOfferings{clock: clk, until: map[string]time.Time{}}
}

func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

// Mark records an offering as unavailable for UnavailableTTL.
func (u *UnavailableOfferings) Mark(instanceType, zone, capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[offeringKey(instanceType, zone, capacityType)] = u.clock.Now().Add(UnavailableTTL)
}

// IsUnavailable reports whether an offering is in the cache.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := offeringKey(instanceType, zone, capacityType)
	t, ok := u.until[key]
	if !ok {
		return false
	}
	if !u.clock.Now().Before(t) {
		delete(u.until, key)
		return false
	}
	return true
}

// Len is the number of offerings in the cache (expired ones included until looked at or pruned).
func (u *UnavailableOfferings) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	for k, t := range u.until {
		if !now.Before(t) {
			delete(u.until, k)
		}
	}
	return len(u.until)
}

// Apply marks the offerings of its in the cache unavailable, in place (a reserved offering is keyed by its
// reservation: Offering.CacheKey).
func (u *UnavailableOfferings) Apply(its []*InstanceType) {
	for _, it := range its {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			o.Available = o.Available && !u.IsUnavailable(it.Name, o.Zone, o.CacheKey())
		}
	}
}
