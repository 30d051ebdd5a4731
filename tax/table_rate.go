package tax

// RateBPS returns the rate in basis points of the most specific row for the
// query, and false if no row matches. It makes *Table a surgepay.TaxTable.
func (t *Table) RateBPS(country, region, postalCode, category string) (int, bool) {
	r, ok := t.Lookup(Query{Country: country, Region: region, PostalCode: postalCode, Category: category})
	return r.RateBPS, ok
}

// Compute is the package's Compute, as a method, so the engine can use the
// table's rounding rule through the surgepay.TaxTable interface.
func (t *Table) Compute(amountMinor int64, rateBPS int) (int64, error) {
	return Compute(amountMinor, rateBPS)
}
