package webhook

// PublicAddr exposes publicAddr to the tests.
var PublicAddr = publicAddr
