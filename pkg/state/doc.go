/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package state holds what the scheduler plugins and the background loops share inside one scheduler process:
// leadership, and what a NodePool uses (its NodeClaims' capacity, count and price).
package state
