package policy

// DefaultIgnoredResources returns the resources the in-tree garbage collector
// ignores: core and events.k8s.io events. Their REST strategies report
// garbage collection as unsupported, so they never get GC finalizers, and
// watching them would only cost memory. The result is a new slice on every
// call.
func DefaultIgnoredResources() []GroupResource {
	return []GroupResource{
		{Group: "", Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
	}
}

// SetDefaults fills the fields of cfg that were left unset. It does not
// validate.
func SetDefaults(cfg *Config) {
	if cfg.IgnoredResources == nil {
		cfg.IgnoredResources = DefaultIgnoredResources()
	}
}
