// Package heartbeat is the library a node extension embeds to prove it is
// alive: it creates and renews the extension's Lease "<extension>.<node>" in
// the extension namespace, gated on a health probe, and releases it with a
// reason when the extension fails or shuts down (DESIGN §6).
//
// The module is kept separate from nodehealth's main module so that extension
// vendors depend only on client-go and nodehealth.io/api.
package heartbeat
