/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/state"
)

// Listers read a fixed set of objects the way controllers read informer caches (state.Listers).
type Listers = state.Listers

// NewListers returns listers over objs (state.NewListers).
func NewListers(objs ...runtime.Object) (*Listers, error) { return state.NewListers(objs...) }
