/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package interruption reads the EventBridge notices AWS sends before it takes an instance away (spot
// interruption warnings, rebalance recommendations, instance state changes, AWS Health scheduled changes) from an
// SQS queue, and has the affected nodes replaced and drained in time.
package interruption

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what a notice asks for.
type Kind string

// Kinds of notice.
const (
	// KindSpotInterruption: the spot instance is reclaimed in two minutes.
	KindSpotInterruption Kind = "SpotInterruption"
	// KindRebalanceRecommendation: the spot instance is at elevated risk of interruption.
	KindRebalanceRecommendation Kind = "RebalanceRecommendation"
	// KindStateChange: the instance is stopping, stopped, shutting down or terminated.
	KindStateChange Kind = "StateChange"
	// KindScheduledChange: AWS Health scheduled maintenance (retirement, reboot) of the instance.
	KindScheduledChange Kind = "ScheduledChange"
	// KindNoop: a known notice that needs nothing (an instance starting, a Health event of another category).
	KindNoop Kind = "Noop"
	// KindCapacityBlockExpiring is not an SQS message: the Capacity Block a node runs in ends soon (blocks.go).
	KindCapacityBlockExpiring Kind = "CapacityBlockExpiring"
)

// ErrUnknownMessage is returned for a well-formed EventBridge envelope of a source and detail type this package does
// not handle.
var ErrUnknownMessage = errors.New("unknown EventBridge event")

// Message is a parsed notice.
type Message struct {
	// ID of the EventBridge event.
	ID   string
	Kind Kind
	// InstanceIDs affected (one for EC2 events, one or more for AWS Health events).
	InstanceIDs []string
	// State is the new state of a state-change notice.
	State string
	// Time the event was emitted (zero if the envelope has none).
	Time time.Time
}

// envelope is an EventBridge event as it arrives in the SQS message body.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Detail types and sources of the handled events.
const (
	sourceEC2    = "aws.ec2"
	sourceHealth = "aws.health"

	detailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	detailRebalance        = "EC2 Instance Rebalance Recommendation"
	detailStateChange      = "EC2 Instance State-change Notification"
	detailHealth           = "AWS Health Event"
)

// Parse reads an SQS message body holding an EventBridge event. It returns an error wrapping ErrUnknownMessage for
// events it does not handle and a plain error for bodies that are not such an event.
func Parse(body string) (Message, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Message{}, fmt.Errorf("message body is not an EventBridge event: %w", err)
	}
	if env.Source == "" || env.DetailType == "" {
		return Message{}, fmt.Errorf("message body is not an EventBridge event: no source or detail-type")
	}
	msg := Message{ID: env.ID}
	if env.Time != "" {
		t, err := time.Parse(time.RFC3339, env.Time)
		if err != nil {
			return Message{}, fmt.Errorf("event %s: time %q: %w", env.ID, env.Time, err)
		}
		msg.Time = t
	}
	switch {
	case env.Source == sourceEC2 && (env.DetailType == detailSpotInterruption || env.DetailType == detailRebalance ||
		env.DetailType == detailStateChange):
		return parseEC2(env, msg)
	case env.Source == sourceHealth && env.DetailType == detailHealth:
		return parseHealth(env, msg)
	}
	return Message{}, fmt.Errorf("%w: source %q, detail-type %q", ErrUnknownMessage, env.Source, env.DetailType)
}

// parseEC2 reads the detail of an EC2 event: a spot interruption warning, a rebalance recommendation or a state
// change (a state the instance is leaving by is a state change; pending and running are no-ops).
func parseEC2(env envelope, msg Message) (Message, error) {
	var d ec2Detail
	if err := json.Unmarshal(env.Detail, &d); err != nil {
		return Message{}, fmt.Errorf("event %s (%s): detail: %w", env.ID, env.DetailType, err)
	}
	if !validInstanceID(d.InstanceID) {
		return Message{}, fmt.Errorf("event %s (%s): detail.instance-id %q is not an instance id", env.ID, env.DetailType, d.InstanceID)
	}
	msg.InstanceIDs = []string{d.InstanceID}
	switch env.DetailType {
	case detailSpotInterruption:
		msg.Kind = KindSpotInterruption
	case detailRebalance:
		msg.Kind = KindRebalanceRecommendation
	default:
		msg.State = d.State
		switch d.State {
		case "stopping", "stopped", "shutting-down", "terminated":
			msg.Kind = KindStateChange
		case "pending", "running":
			msg.Kind = KindNoop
		default:
			return Message{}, fmt.Errorf("event %s (%s): detail.state %q is not an instance state", env.ID, env.DetailType, d.State)
		}
	}
	return msg, nil
}

// parseHealth reads the detail of an AWS Health event: an EC2 scheduled change names the instances affected; any
// other is a no-op.
func parseHealth(env envelope, msg Message) (Message, error) {
	var d healthDetail
	if err := json.Unmarshal(env.Detail, &d); err != nil {
		return Message{}, fmt.Errorf("event %s (%s): detail: %w", env.ID, env.DetailType, err)
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		msg.Kind = KindNoop
		return msg, nil
	}
	for _, e := range d.AffectedEntities {
		if validInstanceID(e.EntityValue) {
			msg.InstanceIDs = append(msg.InstanceIDs, e.EntityValue)
		}
	}
	if len(msg.InstanceIDs) == 0 {
		return Message{}, fmt.Errorf("event %s (%s): no instance id in detail.affectedEntities", env.ID, env.DetailType)
	}
	msg.Kind = KindScheduledChange
	return msg, nil
}

// validInstanceID reports whether s looks like an EC2 instance id (i- and 8 or 17 hex digits).
func validInstanceID(s string) bool {
	hex, ok := strings.CutPrefix(s, "i-")
	if !ok || (len(hex) != 8 && len(hex) != 17) {
		return false
	}
	for _, r := range hex {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
