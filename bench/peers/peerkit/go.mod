module github.com/tollgate-dev/tollgate/bench/peers/peerkit

go 1.26.8

// pgx at the Temporal peer's version (the one its server names), the lower
// of the two peers': a peer that names a newer one (River) keeps it, and
// neither is moved by requiring peerkit.
require github.com/jackc/pgx/v5 v5.10.0

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.29.0 // indirect
)
