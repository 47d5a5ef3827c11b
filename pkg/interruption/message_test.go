/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func envelopeJSON(source, detailType, detail string) string {
	return `{"version":"0","id":"e-1","detail-type":"` + detailType + `","source":"` + source +
		`","account":"111122223333","time":"2026-11-26T10:00:00Z","region":"us-east-1","resources":[],"detail":` + detail + `}`
}

func TestParse(t *testing.T) {
	const id = "i-0123456789abcdef0"
	tests := []struct {
		name      string
		body      string
		wantKind  Kind
		wantIDs   []string
		wantState string
		wantErr   string
		unknown   bool
	}{
		{name: "spot interruption", body: envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning",
			`{"instance-id":"`+id+`","instance-action":"terminate"}`), wantKind: KindSpotInterruption, wantIDs: []string{id}},
		{name: "rebalance", body: envelopeJSON("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"`+id+`"}`),
			wantKind: KindRebalanceRecommendation, wantIDs: []string{id}},
		{name: "stopping", body: envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"`+id+`","state":"stopping"}`),
			wantKind: KindStateChange, wantIDs: []string{id}, wantState: "stopping"},
		{name: "terminated", body: envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"`+id+`","state":"terminated"}`),
			wantKind: KindStateChange, wantIDs: []string{id}, wantState: "terminated"},
		{name: "running is nothing to do", body: envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"`+id+`","state":"running"}`),
			wantKind: KindNoop, wantIDs: []string{id}, wantState: "running"},
		{name: "scheduled change", body: envelopeJSON("aws.health", "AWS Health Event",
			`{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"`+id+`"},{"entityValue":"i-00000000"}]}`),
			wantKind: KindScheduledChange, wantIDs: []string{id, "i-00000000"}},
		{name: "health issue is nothing to do", body: envelopeJSON("aws.health", "AWS Health Event",
			`{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[]}`), wantKind: KindNoop},
		{name: "scheduled change without instance", body: envelopeJSON("aws.health", "AWS Health Event",
			`{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"vol-1"}]}`), wantErr: "affectedEntities"},
		{name: "unknown detail type", body: envelopeJSON("aws.ec2", "EC2 AMI State Change", `{}`), wantErr: "unknown", unknown: true},
		{name: "bad instance id", body: envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"x"}`), wantErr: "instance-id"},
		{name: "bad state", body: envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"`+id+`","state":"melting"}`), wantErr: "detail.state"},
		{name: "not json", body: "hello", wantErr: "not an EventBridge event"},
		{name: "json but no envelope", body: `{"a":1}`, wantErr: "no source"},
		{name: "detail of the wrong shape", body: envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `[1]`), wantErr: "detail"},
		{name: "bad time", body: strings.Replace(envelopeJSON("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"`+id+`"}`),
			"2026-11-26T10:00:00Z", "yesterday", 1), wantErr: "time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := Parse(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if errors.Is(err, ErrUnknownMessage) != tc.unknown {
					t.Errorf("errors.Is(err, ErrUnknownMessage) = %v, want %v", !tc.unknown, tc.unknown)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg.Kind != tc.wantKind || msg.State != tc.wantState || strings.Join(msg.InstanceIDs, ",") != strings.Join(tc.wantIDs, ",") {
				t.Errorf("got kind %s ids %v state %q, want %s %v %q", msg.Kind, msg.InstanceIDs, msg.State, tc.wantKind, tc.wantIDs, tc.wantState)
			}
			if !msg.Time.Equal(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)) || msg.ID != "e-1" {
				t.Errorf("got time %s id %q", msg.Time, msg.ID)
			}
		})
	}
}

// FuzzParse: any body gives a message of a known kind with valid instance ids, or an error; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0123456789abcdef0"}`))
	f.Add(envelopeJSON("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-01234567"}]}`))
	f.Add(envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0123456789abcdef0","state":"stopped"}`))
	f.Add(`{"source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":null}`)
	f.Add("")
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := Parse(body)
		if err != nil {
			return
		}
		switch msg.Kind {
		case KindNoop:
		case KindSpotInterruption, KindRebalanceRecommendation, KindStateChange, KindScheduledChange:
			if len(msg.InstanceIDs) == 0 {
				t.Fatalf("%s without instance ids from %q", msg.Kind, body)
			}
		default:
			t.Fatalf("unknown kind %q from %q", msg.Kind, body)
		}
		for _, id := range msg.InstanceIDs {
			if !validInstanceID(id) {
				t.Fatalf("invalid instance id %q from %q", id, body)
			}
		}
	})
}
