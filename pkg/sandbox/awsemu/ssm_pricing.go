/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// SSM is the emulated Systems Manager parameter store (GetParameter only).
type SSM struct {
	mu     sync.Mutex
	params map[string]string
}

func newSSM() *SSM { return &SSM{params: map[string]string{}} }

// Put sets a parameter.
func (s *SSM) Put(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[name] = value
}

// Get returns a parameter's value.
func (s *SSM) Get(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.params[name]
	return v, ok
}

// Delete removes a parameter (as when AWS stops publishing an image variant).
func (s *SSM) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.params, name)
}

func (s *SSM) handle(w http.ResponseWriter, action string, body []byte) {
	if action != "GetParameter" {
		writeJSONError(w, http.StatusBadRequest, "InvalidAction", "", "the emulator serves only GetParameter")
		return
	}
	var in struct{ Name string }
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSONError(w, http.StatusBadRequest, "ValidationException", "", err.Error())
		return
	}
	s.mu.Lock()
	v, ok := s.params[in.Name]
	s.mu.Unlock()
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "ParameterNotFound", "", "parameter "+in.Name+" not found")
		return
	}
	writeJSON(w, "1.1", map[string]any{"Parameter": map[string]any{
		"Name": in.Name, "Type": "String", "Value": v, "Version": 1, "DataType": "aws:ec2:image",
		"ARN": "arn:aws:ssm:emulated::parameter" + in.Name, "LastModifiedDate": epochSeconds(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)),
	}})
}

// serviceCodeEC2 is EC2's service code in the Price List.
const serviceCodeEC2 = "AmazonEC2"

// pricing is the emulated AWS Price List service (GetProducts for AmazonEC2 on-demand Linux prices).
type pricing struct {
	region string
	docs   []string
}

// currencyOf is the currency a catalog's prices are in.
func currencyOf(c *catalog.File) string {
	if c.Currency != "" {
		return c.Currency
	}
	return "USD"
}

func newPricing(c *catalog.File) *pricing {
	p := &pricing{region: c.Region}
	prices := c.OnDemandPrices()
	names := slices.Sorted(maps.Keys(prices))
	for i, name := range names {
		sku := fmt.Sprintf("SKU%08d", i)
		doc := map[string]any{
			"product": map[string]any{"productFamily": "Compute Instance", "sku": sku, "attributes": map[string]string{
				"instanceType": name, "regionCode": c.Region, "operatingSystem": "Linux", "tenancy": "Shared",
				"preInstalledSw": "NA", "capacitystatus": "Used", "servicecode": serviceCodeEC2}},
			"serviceCode": serviceCodeEC2,
			"terms": map[string]any{"OnDemand": map[string]any{sku + ".JRTCKXETXF": map[string]any{
				"sku": sku, "offerTermCode": "JRTCKXETXF",
				"priceDimensions": map[string]any{sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{
					"unit": "Hrs", "pricePerUnit": map[string]string{currencyOf(c): strconv.FormatFloat(prices[name], 'f', 10, 64)}}},
			}}},
		}
		raw, _ := json.Marshal(doc)
		p.docs = append(p.docs, string(raw))
	}
	return p
}

func (p *pricing) handle(w http.ResponseWriter, action string, body []byte) {
	if action != "GetProducts" {
		writeJSONError(w, http.StatusBadRequest, "InvalidAction", "", "the emulator serves only GetProducts")
		return
	}
	var in struct {
		ServiceCode string
		Filters     []struct{ Field, Value, Type string }
		NextToken   string
		MaxResults  int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSONError(w, http.StatusBadRequest, "InvalidParameterException", "", err.Error())
		return
	}
	if in.ServiceCode != serviceCodeEC2 {
		writeJSON(w, "1.1", priceList([]string{}))
		return
	}
	for _, f := range in.Filters {
		if f.Field == "regionCode" && f.Value != p.region {
			writeJSON(w, "1.1", priceList([]string{}))
			return
		}
	}
	start, _ := strconv.Atoi(in.NextToken)
	limit := in.MaxResults
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	// a token the emulator did not give reads from the start (negative) or gives an empty page (past the end)
	start = min(max(start, 0), len(p.docs))
	end := start + min(limit, len(p.docs)-start)
	out := priceList(p.docs[start:end])
	if end < len(p.docs) {
		out["NextToken"] = strconv.Itoa(end)
	}
	writeJSON(w, "1.1", out)
}

// priceList is a GetProducts answer listing the price documents docs.
func priceList(docs []string) map[string]any {
	return map[string]any{"FormatVersion": "aws_v1", "PriceList": docs}
}
