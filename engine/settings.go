package engine

import (
	"github.com/surgepay/surgepay"
)

// Settings are the per-merchant pipeline switches: a default and
// per-merchant overrides. Replaced as a whole by SetSettings.
type Settings struct {
	Default   surgepay.MerchantSettings
	Merchants map[string]surgepay.MerchantSettings
}

// For returns the settings of a merchant.
func (s *Settings) For(merchantID string) surgepay.MerchantSettings {
	if m, ok := s.Merchants[merchantID]; ok {
		return m
	}
	return s.Default
}

// SetSettings replaces the merchant settings at once; requests already
// running keep the settings they started with. Safe for concurrent use.
func (e *Engine) SetSettings(s *Settings) { e.settings.Store(s) }

// SettingsFor returns the settings in force for a merchant.
func (e *Engine) SettingsFor(merchantID string) surgepay.MerchantSettings {
	if s := e.settings.Load(); s != nil {
		return s.For(merchantID)
	}
	return surgepay.DefaultMerchantSettings()
}
