// Package console is the web console of a statehost instance: one page, served on the admin
// listener at GET /, that shows the instance's tasks, restores, lag, module versions, deploys
// and a few figures, and browses its stores. It holds the page's assets, embedded in the
// binary (no CDN, no build step: plain HTML, CSS and JavaScript), and their handler; the
// runtime wraps the admin API with it (host/runtime.Runtime.Handler).
//
// The page reads nothing but the admin API, from the browser, with the API's own rules: the
// assets are public, the data is not. When the instance has an admin token, the page asks
// for it on the first 401, keeps it in a JavaScript variable only (no cookie, no storage: a
// reload asks again), and sends it as "Authorization: Bearer <token>" on every call. The page
// changes no state.
//
// Assets, under GET /console/:
//
//	GET /                       index.html
//	GET /console/console.js     the page's script
//	GET /console/console.css    its style
//
// Every answer has a Content-Security-Policy that allows only the page's own scripts, styles
// and API calls, and forbids framing.
package console
