/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/xml"

	"github.com/google/uuid"
)

// strategyCluster is the placement strategy that packs a group's instances close together in one zone.
const strategyCluster = "cluster"

// PlacementGroup is an emulated placement group.
type PlacementGroup struct {
	ID, Name string
	// Strategy is cluster, partition or spread.
	Strategy       string
	PartitionCount int
	Tags           map[string]string
}

type xmlPlacementGroup struct {
	GroupName      string   `xml:"groupName"`
	GroupID        string   `xml:"groupId"`
	State          string   `xml:"state"`
	Strategy       string   `xml:"strategy"`
	PartitionCount int      `xml:"partitionCount,omitempty"`
	Tags           []xmlTag `xml:"tagSet>item"`
}

type createPlacementGroupResponse struct {
	XMLName        xml.Name          `xml:"CreatePlacementGroupResponse"`
	RequestID      string            `xml:"requestId"`
	Return         bool              `xml:"return"`
	PlacementGroup xmlPlacementGroup `xml:"placementGroup"`
}

type describePlacementGroupsResponse struct {
	XMLName   xml.Name            `xml:"DescribePlacementGroupsResponse"`
	RequestID string              `xml:"requestId"`
	Groups    []xmlPlacementGroup `xml:"placementGroupSet>item"`
}

type deletePlacementGroupResponse struct {
	XMLName   xml.Name `xml:"DeletePlacementGroupResponse"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}

func (g *PlacementGroup) xml() xmlPlacementGroup {
	return xmlPlacementGroup{GroupName: g.Name, GroupID: g.ID, State: "available", Strategy: g.Strategy, PartitionCount: g.PartitionCount,
		Tags: tagSet(g.Tags)}
}

// createPlacementGroup serves CreatePlacementGroup: a name of the account's own, a strategy, tags on creation.
func (e *EC2) createPlacementGroup(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name, strategy := q.Str("GroupName"), q.Str("Strategy")
	switch {
	case name == "":
		return nil, invalid("MissingParameter", "The request must contain the parameter groupName")
	case strategy != strategyCluster && strategy != "partition" && strategy != "spread":
		return nil, invalid(codeInvalidParameterValue, "Strategy %q must be cluster, partition or spread", strategy)
	case e.placementGroups[name] != nil:
		return nil, invalid("InvalidPlacementGroup.Duplicate", "The placement group '%s' already exists.", name)
	}
	g := &PlacementGroup{ID: e.newID("pg"), Name: name, Strategy: strategy, PartitionCount: q.Int("PartitionCount", 0), Tags: q.tagSpecs("placement-group")}
	if strategy == "partition" && g.PartitionCount == 0 {
		g.PartitionCount = 2
	}
	e.placementGroups[name] = g
	return &createPlacementGroupResponse{RequestID: uuid.NewString(), Return: true, PlacementGroup: g.xml()}, nil
}

// describePlacementGroups serves DescribePlacementGroups by names, ids and filters (group-name, group-id,
// strategy, state, tags), in the order of their names.
func (e *EC2) describePlacementGroups(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	names, ids := q.Strings("GroupName"), q.Strings("GroupId")
	resp := &describePlacementGroupsResponse{RequestID: uuid.NewString()}
	for _, name := range append(append([]string(nil), names...), ids...) {
		if e.placementGroups[name] == nil && e.placementGroupByID(name) == nil {
			return nil, invalid("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
		}
	}
	for _, name := range sortedKeys(e.placementGroups) {
		g := e.placementGroups[name]
		if (len(names) > 0 && !matchValue(names, g.Name)) || (len(ids) > 0 && !matchValue(ids, g.ID)) {
			continue
		}
		if !matchFilters(q.Filters(), g.Tags, map[string]string{"group-name": g.Name, "group-id": g.ID, "strategy": g.Strategy, filterState: "available"}) {
			continue
		}
		resp.Groups = append(resp.Groups, g.xml())
	}
	return resp, nil
}

// deletePlacementGroup serves DeletePlacementGroup; a group an instance still runs in is refused, as EC2 does.
func (e *EC2) deletePlacementGroup(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name := q.Str("GroupName")
	if e.placementGroups[name] == nil {
		return nil, invalid("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
	}
	for _, inst := range e.instances {
		if inst.PlacementGroup == name && inst.State != stateTerminated {
			return nil, invalid("InvalidPlacementGroup.InUse", "The placement group '%s' is in use and may not be deleted.", name)
		}
	}
	delete(e.placementGroups, name)
	return &deletePlacementGroupResponse{RequestID: uuid.NewString(), Return: true}, nil
}

// placementError says why an override cannot launch into its placement group: the group is unknown, or it is a
// cluster group whose running instances are in another zone. Caller holds e.mu.
func (e *EC2) placementError(o fleetOverride) (string, string) {
	if o.placementGroup == "" {
		return "", ""
	}
	g := e.placementGroups[o.placementGroup]
	if g == nil {
		return "InvalidPlacementGroup.Unknown", "The Placement Group '" + o.placementGroup + "' is unknown."
	}
	if g.Strategy != strategyCluster {
		return "", ""
	}
	for _, inst := range e.instances {
		if inst.PlacementGroup == g.Name && inst.State != stateTerminated && inst.State != stateShuttingDown && inst.Zone != o.zone {
			return codeInsufficientCapacity, "Placement group '" + g.Name + "' has instances in " + inst.Zone + ": a cluster placement group spans one Availability Zone."
		}
	}
	return "", ""
}

func (e *EC2) placementGroupByID(id string) *PlacementGroup {
	for _, g := range e.placementGroups {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// PlacementGroups returns the placement groups, by name.
func (e *EC2) PlacementGroups() map[string]PlacementGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]PlacementGroup{}
	for name, g := range e.placementGroups {
		out[name] = *g
	}
	return out
}
