#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Test certificates for the TLS server of powerdiag's integration tests (tests/it/tls.rs).
set -euo pipefail

HARNESS_TAG=tls # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF2'
Usage: tests/harness/tls.sh certs DIR
       tests/harness/tls.sh server-options DIR

  certs DIR           write, with openssl, a throw-away PKI into DIR (created; kept if complete):
                        ca.pem            the CA that signs the server and client certificates
                        server.pem/-key   the server's (subjectAltName IP:127.0.0.1, DNS:localhost)
                        client.pem/-key   a client certificate (CN powerdiag-client), for REQUIRE X509
                        other-ca.pem      an unrelated CA: verifying the server with it must fail
                        wrongname.pem/-key  a server certificate of the same CA naming another host
                                          (IP:10.99.99.99, DNS:db.invalid): VERIFY_CA accepts it,
                                          VERIFY_IDENTITY refuses it
                      Keys are EC P-256, certificates valid 30 days, all files world-readable
                      (the server runs as the mysql user; test keys only).
  server-options DIR [LEAF]
                      print the POWERDIAG_IT_MARIADB_OPTIONS that make mariadb.sh start a server
                      with DIR's certificates (ssl_ca, ssl_cert, ssl_key); LEAF is the server
                      certificate's name (default server; wrongname for the other host's).
EOF2
}

cmd_certs() {
    local dir=$1 tmp
    command -v openssl >/dev/null 2>&1 || die "openssl missing (tests/harness/packages.txt; run tests/harness/setup.sh)"
    case $dir in
    /*) ;;
    *) die "DIR must be an absolute path (got '$dir')" ;;
    esac
    if [ -f "$dir/.complete" ]; then
        log "certificates in $dir already complete"
        return 0
    fi
    tmp=$(mktemp -d "${dir%/}.XXXXXX")
    (
        cd "$tmp"
        key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
        ca() { # NAME CN
            key "$1-key.pem"
            openssl req -x509 -new -key "$1-key.pem" -sha256 -days 30 -subj "/CN=$2" \
                -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
                -out "$1.pem"
        }
        leaf() { # NAME CN EXTENSIONS
            key "$1-key.pem"
            openssl req -new -key "$1-key.pem" -subj "/CN=$2" -out "$1.csr"
            printf '%s\n' "$3" >"$1.ext"
            openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -sha256 \
                -days 30 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
            rm -f "$1.csr" "$1.ext"
        }
        ca ca "powerdiag test CA"
        ca other-ca "an unrelated CA"
        leaf server "powerdiag test server" \
            "subjectAltName=IP:127.0.0.1,DNS:localhost
basicConstraints=CA:FALSE
extendedKeyUsage=serverAuth"
        leaf wrongname "powerdiag wrong-name server" \
            "subjectAltName=IP:10.99.99.99,DNS:db.invalid
basicConstraints=CA:FALSE
extendedKeyUsage=serverAuth"
        leaf client "powerdiag-client" \
            "basicConstraints=CA:FALSE
extendedKeyUsage=clientAuth"
        openssl verify -CAfile ca.pem server.pem wrongname.pem client.pem >/dev/null
        chmod 0644 ./*.pem
        touch .complete
    ) || {
        rm -rf "$tmp"
        die "openssl failed to write the test certificates"
    }
    rm -rf "$dir"
    mv "$tmp" "$dir"
    chmod 0755 "$dir"
    log "test PKI written to $dir"
}

case ${1:-} in
certs)
    [ $# -eq 2 ] || die "certs needs DIR"
    cmd_certs "$2"
    ;;
server-options)
    [ $# -eq 2 ] || [ $# -eq 3 ] || die "server-options needs DIR [LEAF]"
    leaf=${3:-server}
    case $leaf in server | wrongname) ;; *) die "LEAF is server or wrongname (got '$leaf')" ;; esac
    printf 'ssl_ca=%s ssl_cert=%s ssl_key=%s\n' "$2/ca.pem" "$2/$leaf.pem" "$2/$leaf-key.pem"
    ;;
-h | --help | help) usage ;;
*)
    usage >&2
    exit 2
    ;;
esac
