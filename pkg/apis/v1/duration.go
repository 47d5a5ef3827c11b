/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the spelling of an unbounded NillableDuration.
const Never = "Never"

// NillableDuration is a duration that may also be "Never". Its zero value (nil Duration) means Never.
// +kubebuilder:validation:Type=string
type NillableDuration struct {
	Duration *time.Duration `json:"-"`
}

// NewDuration returns a NillableDuration of d.
func NewDuration(d time.Duration) *NillableDuration {
	return &NillableDuration{Duration: &d}
}

// NeverDuration returns a NillableDuration that never elapses.
func NeverDuration() *NillableDuration {
	return &NillableDuration{}
}

// IsNever reports whether d never elapses.
func (d NillableDuration) IsNever() bool { return d.Duration == nil }

// String renders d as the API writes it.
func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// ParseNillableDuration parses "Never" or a Go duration such as "720h" or "5m".
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{}, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("%q is neither a duration nor %q: %w", s, Never, err)
	}
	return NillableDuration{Duration: &v}, nil
}

// MarshalJSON writes "Never" or the duration string.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads "Never" or a duration string.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	v, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
