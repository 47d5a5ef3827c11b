/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command importprices writes hack/catalog/data/ec2-on-demand-prices-<region>.json from a Go source file that holds
// AWS's published on-demand prices as a map literal of region to instance type to hourly price, such as the static
// price tables the AWS provider of Karpenter generates from the Price List API
// (pkg/providers/pricing/zz_generated.pricing_*.go of github.com/aws/karpenter-provider-aws). Only the figures are
// read: region, instance type and price.
//
//	go run ./hack/catalog/importprices -from zz_generated.pricing_aws_cn.go -generated 2024-11-06 \
//	  -currency CNY -source "github.com/aws/karpenter-provider-aws@v1.15.2 ..." -out hack/catalog/data
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
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

func main() {
	from := flag.String("from", "", "Go source file with the price map literal")
	out := flag.String("out", "hack/catalog/data", "folder to write the price files to")
	generated := flag.String("generated", "", "date of the prices (YYYY-MM-DD)")
	currency := flag.String("currency", "USD", "currency of the prices")
	source := flag.String("source", "", "where the figures come from, written into each file")
	flag.Parse()
	if err := run(*from, *out, *generated, *currency, *source); err != nil {
		fmt.Fprintln(os.Stderr, "importprices:", err)
		os.Exit(1)
	}
}

func run(from, out, generated, currency, source string) error {
	if from == "" || generated == "" {
		return fmt.Errorf("-from and -generated are required")
	}
	byRegion, err := readPrices(from)
	if err != nil {
		return err
	}
	for region, prices := range byRegion {
		f := priceFile{Region: region, Generated: generated, Source: source, Prices: prices,
			Unit: currency + " per hour, Linux, shared tenancy, on-demand"}
		raw, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			return err
		}
		path := filepath.Join(out, "ec2-on-demand-prices-"+region+".json")
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil { //nolint:gosec // G306: a data file of the repository
			return err
		}
		fmt.Printf("%s: %d prices\n", path, len(prices))
	}
	return nil
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
