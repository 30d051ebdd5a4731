package webhook

// PublicAddr exposes publicAddr to the tests.
var PublicAddr = publicAddr

// Truncate and ErrorBytesMax expose the error-text bound to the tests.
var Truncate = truncate

const ErrorBytesMax = errorBytesMax
