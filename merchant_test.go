package surgepay

import (
	"math"
	"strings"
	"testing"
)

func TestMerchantSettingsValidate(t *testing.T) {
	ok := func(edit func(s *MerchantSettings)) MerchantSettings {
		s := DefaultMerchantSettings()
		edit(&s)
		return s
	}
	for _, tc := range []struct {
		name  string
		s     MerchantSettings
		param string // "" when valid
	}{
		{"OK", DefaultMerchantSettings(), ""},
		{"OKRateLimit", ok(func(s *MerchantSettings) { s.RateLimit, s.RateBurst = 100, 250 }), ""},
		{"OKRateLimitFractional", ok(func(s *MerchantSettings) { s.RateLimit = MerchantRateLimitMin }), ""},
		{"OKRateLimitMax", ok(func(s *MerchantSettings) { s.RateLimit, s.RateBurst = MerchantRateLimitMax, MerchantRateBurstMax }), ""},
		{"OKBurstWithoutRate", ok(func(s *MerchantSettings) { s.RateBurst = 10 }), ""},
		{"ErrProcessing", ok(func(s *MerchantSettings) { s.Processing = "fast" }), "m.processing"},
		{"ErrRateLimitNegative", ok(func(s *MerchantSettings) { s.RateLimit = -1 }), "m.rate_limit"},
		{"ErrRateLimitBelowMin", ok(func(s *MerchantSettings) { s.RateLimit = MerchantRateLimitMin / 2 }), "m.rate_limit"},
		{"ErrRateLimitAboveMax", ok(func(s *MerchantSettings) { s.RateLimit = MerchantRateLimitMax + 1 }), "m.rate_limit"},
		{"ErrRateLimitNaN", ok(func(s *MerchantSettings) { s.RateLimit = math.NaN() }), "m.rate_limit"},
		{"ErrRateLimitInf", ok(func(s *MerchantSettings) { s.RateLimit = math.Inf(1) }), "m.rate_limit"},
		{"ErrRateBurstNegative", ok(func(s *MerchantSettings) { s.RateLimit, s.RateBurst = 10, -1 }), "m.rate_burst"},
		{"ErrRateBurstAboveMax", ok(func(s *MerchantSettings) { s.RateLimit, s.RateBurst = 10, MerchantRateBurstMax+1 }), "m.rate_burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate("m")
			if tc.param == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			e, isErr := err.(*Error)
			if !isErr || e.Code != EINVALID || e.Param != tc.param || !strings.Contains(e.Message, tc.param) {
				t.Fatalf("Validate = %v, want an invalid error naming %s", err, tc.param)
			}
		})
	}
}

func TestMerchantSettingsBurst(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
		want  int
	}{
		{0, 0, 1},
		{0.5, 0, 1},
		{1, 0, 1},
		{2.5, 0, 3},
		{100, 0, 100},
		{100, 7, 7},
		{0.5, 4, 4},
	} {
		s := MerchantSettings{RateLimit: tc.rate, RateBurst: tc.burst}
		if got := s.Burst(); got != tc.want {
			t.Errorf("Burst() of rate %v, rate_burst %d = %d, want %d", tc.rate, tc.burst, got, tc.want)
		}
	}
}
