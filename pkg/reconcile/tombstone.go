/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package reconcile

import "k8s.io/client-go/tools/cache"

// Deleted returns the object an informer's delete notification carries, as T: the object itself, or the last
// state a tombstone (a deletion the informer missed while it relisted) kept of it. ok is false for anything else.
func Deleted[T any](obj any) (T, bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = tomb.Obj
	}
	t, ok := obj.(T)
	return t, ok
}
