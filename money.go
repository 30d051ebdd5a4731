package surgepay

import (
	"strings"
)

// Currency is an ISO 4217 currency: its alphabetic code (lower case, as in
// the API) and its exponent, the number of digits of its minor unit.
type Currency struct {
	Code     string
	Exponent int
}

// currencies lists the active ISO 4217 currencies by lower-case code with
// their minor-unit exponents (ISO 4217 amendment 176). Funds codes and
// precious metals are left out: cards are not charged in them.
var currencies = func() map[string]Currency {
	zero := "bif clp djf gnf isk jpy kmf krw pyg rwf ugx uyi vnd vuv xaf xof xpf"
	three := "bhd iqd jod kwd lyd omr tnd"
	four := "clf uyw"
	two := "aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bmd bnd bob brl bsd btn bwp byn bzd " +
		"cad cdf chf cny cop crc cup cve czk dkk dop dzd egp ern etb eur fjd fkp gbp gel ghs gip gmd gtq gyd " +
		"hkd hnl htg huf idr ils inr irr jmd kes kgs khr kpw kyd kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt " +
		"mop mru mur mvr mwk mxn myr mzn nad ngn nio nok npr nzd pab pen pgk php pkr pln qar ron rsd rub sar sbd " +
		"scr sdg sek sgd shp sle sos srd ssp stn svc syp szl thb tjs tmt top try ttd twd tzs uah usd uyu uzs " +
		"ves wst xcd xcg yer zar zmw zwg"
	m := make(map[string]Currency)
	for exp, list := range map[int]string{0: zero, 2: two, 3: three, 4: four} {
		for _, c := range strings.Fields(list) {
			m[c] = Currency{Code: c, Exponent: exp}
		}
	}
	return m
}()

// LookupCurrency returns the currency for an ISO 4217 code in any case.
func LookupCurrency(code string) (Currency, bool) {
	if len(code) != 3 {
		return Currency{}, false
	}
	c, ok := currencies[strings.ToLower(code)]
	return c, ok
}

// ValidateAmount checks that amount is a positive number of minor units no
// larger than AmountMinorMax. param names the request field.
func ValidateAmount(param string, amount int64) error {
	switch {
	case amount <= 0:
		return Invalid(param, "amount_too_small", "%s must be a positive integer number of minor units", param)
	case amount > AmountMinorMax:
		return Invalid(param, "amount_too_large", "%s must be at most %d minor units", param, AmountMinorMax)
	}
	return nil
}

// ValidateCurrency returns the canonical (lower-case) code of a known currency.
func ValidateCurrency(param, code string) (string, error) {
	c, ok := LookupCurrency(code)
	if !ok {
		return "", Invalid(param, "currency_unknown", "%s must be an ISO 4217 currency code", param)
	}
	return c.Code, nil
}
