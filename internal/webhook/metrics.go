package webhook

// Admission results, the values of the result label.
const (
	resultInjected = "injected"
	resultSkipped  = "skipped"
	resultDenied   = "denied"
	resultError    = "error"
)

// Reasons for the reason label.
const (
	reasonNotPodCreate    = "NotPodCreate"
	reasonNoMatch         = "NoMatchingSidecarSet"
	reasonUnchanged       = "AlreadyInjected"
	reasonInjected        = "Injected"
	reasonStripped        = "StaleInjectionRemoved"
	reasonDecode          = "DecodeError"
	reasonNotReady        = "NotReady"
	reasonNamespaceLookup = "NamespaceLookupError"
	reasonInjectionError  = "InjectionError"
)
