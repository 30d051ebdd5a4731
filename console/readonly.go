package console

import "net/http"

// A read-only operator (Config.ReadOnly: the admin listener's read-only
// token or certificate) searches and reads every page, and acts on
// nothing: the pages leave their actions out (ReadOnly in their data),
// and every action's confirmation page and POST is refused here, in one
// place (acting), even when reached by its address. The admin
// listener's guard refuses the POSTs of a read-only credential before
// they get here; this is the console's own check, and the one that
// refuses the confirmation pages (GETs).

// ReadOnlyNotice is what the pages say to a read-only operator.
const ReadOnlyNotice = "read-only: you can search but not act"

// readOnly reports whether r's operator may only read.
func (c *Console) readOnly(r *http.Request) bool {
	return c.cfg.ReadOnly != nil && c.cfg.ReadOnly(r)
}

// acting returns h, an action's confirmation or POST, refusing a
// read-only operator with a 403 page.
func (c *Console) acting(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.readOnly(r) {
			c.fail(w, r, http.StatusForbidden, "Read-only",
				ReadOnlyNotice+". This login (the read-only token, or a read-only client certificate) reads every page "+
					"and acts on nothing: log out and log in with the admin token to act.")
			return
		}
		h(w, r)
	}
}
