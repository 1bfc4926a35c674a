package pluginsdk

// ProcessFunc processes one record: the current record of ctx. A non-nil error fails the
// batch; the host reports the error's text with the record's offset and discards the
// instance.
type ProcessFunc func(ctx Context) error

// Option configures a registration.
type Option func(*registration)

// WithStores declares stores the processor uses. The SDK opens them when the instance
// starts, so a store the host does not have fails the instance at once, naming the store,
// instead of failing the first batch. Stores not declared can still be used: Context.Store
// opens them on first use.
func WithStores(names ...string) Option {
	return func(r *registration) { r.stores = append(r.stores, names...) }
}

type registration struct {
	fn     ProcessFunc
	stores []string
}

var registered *registration

// Register makes fn the plugin's processor; call it once, from init().
//
// Register panics if called twice or with a nil fn: that is a programming error found when
// the plugin starts (or its tests run).
func Register(fn ProcessFunc, opts ...Option) {
	if fn == nil {
		panic("pluginsdk: Register with a nil ProcessFunc")
	}
	if registered != nil {
		panic("pluginsdk: Register called twice")
	}
	r := &registration{fn: fn}
	for _, o := range opts {
		o(r)
	}
	registered = r
}
