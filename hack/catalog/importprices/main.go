/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command importprices writes hack/catalog/data/ec2-on-demand-prices-<region>.json from AWS's published on-demand
// prices in one of two public forms (only the figures are read: region, instance type and price):
//
//   - -from: a Go source file that holds them as a map literal of region to instance type to hourly price, such as
//     the static price tables the AWS provider of Karpenter generates from the Price List API
//     (pkg/providers/pricing/zz_generated.pricing_*.go of github.com/aws/karpenter-provider-aws);
//
//   - -instances: the instances.json dataset of ec2instances.info (each instance type with its Linux on-demand
//     price in every region), as the Go module github.com/cristim/ec2-instances-info serves it (data/instances.json);
//     a region whose file exists already is left as it is (-overwrite to replace it).
//
//     go run ./hack/catalog/importprices -from zz_generated.pricing_aws_cn.go -generated 2024-11-06 \
//     -currency CNY -source "github.com/aws/karpenter-provider-aws@v1.15.2 ..." -out hack/catalog/data
//     go run ./hack/catalog/importprices -instances instances.json -generated 2025-05-28 \
//     -source "ec2instances.info ..." -out hack/catalog/data
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// priceFile is the format of the ec2-on-demand-prices-<region>.json files.
type priceFile struct {
	Region    string             `json:"region"`
	Generated string             `json:"generated"`
	Unit      string             `json:"unit"`
	Source    string             `json:"source,omitempty"`
	Prices    map[string]float64 `json:"prices"`
}

// options are the command's flags.
type options struct {
	from, instances, out, generated, currency, source string
	overwrite                                         bool
}

func main() {
	var o options
	flag.StringVar(&o.from, "from", "", "Go source file with the price map literal")
	flag.StringVar(&o.instances, "instances", "", "ec2instances.info's instances.json")
	flag.StringVar(&o.out, "out", "hack/catalog/data", "folder to write the price files to")
	flag.StringVar(&o.generated, "generated", "", "date of the prices (YYYY-MM-DD)")
	flag.StringVar(&o.currency, "currency", "USD", "currency of the prices")
	flag.StringVar(&o.source, "source", "", "where the figures come from, written into each file")
	flag.BoolVar(&o.overwrite, "overwrite", false, "with -instances, replace the price files of regions that have one")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "importprices:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if (o.from == "") == (o.instances == "") || o.generated == "" {
		return errors.New("-generated and one of -from and -instances are required")
	}
	var byRegion map[string]map[string]float64
	var err error
	if o.from != "" {
		byRegion, err = readPrices(o.from)
	} else {
		byRegion, err = readInstances(o.instances)
	}
	if err != nil {
		return err
	}
	for region, prices := range byRegion {
		path := filepath.Join(o.out, "ec2-on-demand-prices-"+region+".json")
		if _, err := os.Stat(path); err == nil && o.instances != "" && !o.overwrite {
			fmt.Printf("%s: kept (it exists)\n", path)
			continue
		}
		f := priceFile{Region: region, Generated: o.generated, Source: o.source, Prices: prices,
			Unit: o.currency + " per hour, Linux, shared tenancy, on-demand"}
		raw, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil { //nolint:gosec // G306: a data file of the repository
			return err
		}
		fmt.Printf("%s: %d prices\n", path, len(prices))
	}
	return nil
}

// regionName is the form of a region's name; the dataset also prices Local Zones (us-west-2-lax-1) and Wavelength
// Zones under their own names, which are not regions.
var regionName = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)

// instanceRecord is the part of an instances.json entry read here.
type instanceRecord struct {
	InstanceType string `json:"instance_type"`
	Pricing      map[string]struct {
		Linux *struct {
			OnDemand string `json:"ondemand"`
		} `json:"linux"`
	} `json:"pricing"`
}

// readInstances reads the Linux on-demand price of every instance type in every region from instances.json. A
// price that is not a positive number (the dataset writes "N/A" for types a region does not offer) is left out.
func readInstances(path string) (map[string]map[string]float64, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the dataset the user names
	if err != nil {
		return nil, err
	}
	var records []instanceRecord
	if err := json.Unmarshal(raw, &records); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]map[string]float64{}
	for _, rec := range records {
		for region, p := range rec.Pricing {
			if !regionName.MatchString(region) || p.Linux == nil {
				continue
			}
			price, err := strconv.ParseFloat(p.Linux.OnDemand, 64)
			if err != nil || price <= 0 {
				continue
			}
			if out[region] == nil {
				out[region] = map[string]float64{}
			}
			out[region][rec.InstanceType] = price
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no Linux on-demand price in any region", path)
	}
	return out, nil
}

// readPrices finds the map literals keyed by region whose values are maps of instance type to price.
func readPrices(path string) (map[string]map[string]float64, error) {
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	var bad error
	ast.Inspect(file, func(n ast.Node) bool {
		outer, ok := n.(*ast.CompositeLit)
		if !ok || bad != nil {
			return bad == nil
		}
		for _, elt := range outer.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			region, ok := stringLit(kv.Key)
			inner, isMap := kv.Value.(*ast.CompositeLit)
			if !ok || !isMap {
				return true
			}
			prices, err := pricesOf(inner)
			if err != nil {
				bad = fmt.Errorf("%s: %s: %w", path, region, err)
				return false
			}
			if len(prices) > 0 {
				out[region] = prices
			}
		}
		return len(out) == 0
	})
	if bad != nil {
		return nil, bad
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no map of region to instance-type prices", path)
	}
	return out, nil
}

// pricesOf reads a map literal of instance type to price.
func pricesOf(lit *ast.CompositeLit) (map[string]float64, error) {
	prices := map[string]float64{}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		name, ok := stringLit(kv.Key)
		v, isLit := kv.Value.(*ast.BasicLit)
		if !ok || !isLit {
			continue
		}
		price, err := strconv.ParseFloat(v.Value, 64)
		if err != nil {
			return nil, fmt.Errorf("price of %s: %w", name, err)
		}
		prices[name] = price
	}
	return prices, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
