#!/usr/bin/env bash
# services.sh brings up the services memgate's integration tests need, on a
# possibly bare Debian 12 machine, as root, without stdin:
#
#   - PostgreSQL 15 (installed with apt when missing), listening on
#     127.0.0.1:5432 with trust auth for local connections;
#   - pgvector, built from Debian's source package when
#     CREATE EXTENSION vector fails;
#   - Redis on 127.0.0.1:6379;
#   - Chromium (Debian's chromium package), which the web inspector's
#     browser test drives headless.
#
# It is idempotent: a service that already works is left alone. Each step
# prints what it did; any failure stops the script with a clear message.
set -euo pipefail

PG_VERSION=15
PG_PORT=5432
PG_BIN="/usr/lib/postgresql/${PG_VERSION}/bin"
REDIS_PORT=6379
WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-60}"
SCRATCH_DB=memgate_services_check

export DEBIAN_FRONTEND=noninteractive

log() { printf 'services: %s\n' "$*"; }
die() {
	printf 'services: ERROR: %s\n' "$*" >&2
	exit 1
}

if [[ $(id -u) -ne 0 ]]; then
	SUDO=sudo
else
	SUDO=
fi

apt_updated=0
apt_update() {
	if [[ $apt_updated -eq 0 ]]; then
		log "apt-get update"
		$SUDO apt-get update -q || die "apt-get update failed"
		apt_updated=1
	fi
}

apt_install() {
	apt_update
	log "apt-get install -y $*"
	$SUDO apt-get install -y -q --no-install-recommends "$@" || die "apt-get install $* failed"
}

# wait_for runs its arguments until they succeed or WAIT_SECONDS pass.
wait_for() {
	local what=$1
	shift
	local deadline=$((SECONDS + WAIT_SECONDS))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			die "$what not ready after ${WAIT_SECONDS}s"
		fi
		sleep 1
	done
}

# as_postgres runs a command as the postgres OS user (peer auth on the socket).
as_postgres() {
	if [[ $(id -un) == postgres ]]; then
		"$@"
	else
		$SUDO runuser -u postgres -- "$@"
	fi
}

pg_tcp_ok() { psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; }

# ---------------------------------------------------------------- PostgreSQL
ensure_postgres() {
	if pg_tcp_ok; then
		log "PostgreSQL already accepts psql -h 127.0.0.1 -U postgres; leaving it alone"
		return
	fi
	if [[ ! -x "$PG_BIN/postgres" ]] || ! command -v psql >/dev/null; then
		apt_install "postgresql-${PG_VERSION}" "postgresql-client-${PG_VERSION}"
	fi
	if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "${PG_VERSION} main"; then
		log "creating cluster ${PG_VERSION}/main"
		$SUDO pg_createcluster "$PG_VERSION" main --port "$PG_PORT" || die "pg_createcluster failed"
	fi
	local conf="/etc/postgresql/${PG_VERSION}/main"
	local hba="$conf/pg_hba.conf"
	if ! grep -Eq '^[[:space:]]*host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
		log "adding trust auth for 127.0.0.1 and ::1 to $hba"
		local tmp
		tmp=$(mktemp)
		{
			echo "# added by memgate scripts/services.sh for local tests"
			echo "host all all 127.0.0.1/32 trust"
			echo "host all all ::1/128 trust"
			cat "$hba"
		} >"$tmp"
		$SUDO cp "$tmp" "$hba"
		rm -f "$tmp"
		$SUDO chown postgres:postgres "$hba"
	fi
	if ! grep -Eq "^[[:space:]]*port[[:space:]]*=[[:space:]]*${PG_PORT}\b" "$conf/postgresql.conf"; then
		die "cluster ${PG_VERSION}/main does not use port ${PG_PORT}; fix $conf/postgresql.conf"
	fi
	if pg_lsclusters -h | awk -v v="$PG_VERSION" '$1==v && $2=="main" {print $4}' | grep -q online; then
		log "reloading PostgreSQL ${PG_VERSION}/main"
		$SUDO pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main reload || die "reload failed"
	else
		log "starting PostgreSQL ${PG_VERSION}/main"
		$SUDO pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start ||
			die "pg_ctlcluster start failed; see /var/log/postgresql/postgresql-${PG_VERSION}-main.log"
	fi
	wait_for "PostgreSQL on 127.0.0.1:${PG_PORT}" pg_tcp_ok
	log "PostgreSQL accepts connections on 127.0.0.1:${PG_PORT}"
}

# ------------------------------------------------------------------ pgvector
vector_ok() {
	psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $SCRATCH_DB" >/dev/null 2>&1 || return 1
	psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE DATABASE $SCRATCH_DB" >/dev/null 2>&1 || return 1
	local rc=0
	psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$SCRATCH_DB" -v ON_ERROR_STOP=1 -qc \
		"CREATE EXTENSION IF NOT EXISTS vector; SELECT '[1,2,3]'::vector <=> '[1,2,4]'::vector" >/dev/null 2>&1 || rc=1
	psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $SCRATCH_DB" >/dev/null 2>&1 || true
	return $rc
}

ensure_pgvector() {
	if vector_ok; then
		log "pgvector already available (CREATE EXTENSION vector works)"
		return
	fi
	log "CREATE EXTENSION vector fails: building pgvector from Debian's source package"
	local src=/etc/apt/sources.list.d/trixie-src.sources
	if [[ ! -f $src ]]; then
		log "adding deb-src for trixie main ($src)"
		printf '%s\n' \
			'Types: deb-src' \
			'URIs: http://deb.debian.org/debian' \
			'Suites: trixie' \
			'Components: main' \
			'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $SUDO tee "$src" >/dev/null
		apt_updated=0
	fi
	apt_install "postgresql-server-dev-${PG_VERSION}" dpkg-dev make gcc libc6-dev
	local work
	work=$(mktemp -d)
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" EXIT
	log "apt-get source pgvector (in $work)"
	(cd "$work" && apt-get source -q pgvector) || die "apt-get source pgvector failed"
	local dir
	dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
	[[ -n $dir ]] || die "no pgvector source directory after apt-get source"
	log "building $(basename "$dir")"
	# with_llvm=no: skip the JIT bitcode, which would need clang/llvm.
	make -C "$dir" PG_CONFIG="$PG_BIN/pg_config" with_llvm=no >"$work/build.log" 2>&1 ||
		{
			tail -n 40 "$work/build.log" >&2
			die "building pgvector failed"
		}
	$SUDO make -C "$dir" PG_CONFIG="$PG_BIN/pg_config" with_llvm=no install >>"$work/build.log" 2>&1 ||
		{
			tail -n 40 "$work/build.log" >&2
			die "installing pgvector failed"
		}
	vector_ok || die "pgvector installed but CREATE EXTENSION vector still fails"
	log "pgvector $(basename "$dir" | sed 's/^pgvector-//') installed"
}

# --------------------------------------------------------------------- Redis
redis_ok() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }

ensure_redis() {
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		apt_install redis-server
	fi
	if redis_ok; then
		log "Redis already answers PING on 127.0.0.1:${REDIS_PORT}; leaving it alone"
		return
	fi
	log "starting redis-server on 127.0.0.1:${REDIS_PORT}"
	$SUDO mkdir -p /var/lib/redis /var/log/redis
	$SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
		--save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log ||
		die "redis-server failed to start; see /var/log/redis/ci.log"
	wait_for "Redis on 127.0.0.1:${REDIS_PORT}" redis_ok
	log "Redis answers PING on 127.0.0.1:${REDIS_PORT}"
}

# ------------------------------------------------------------------ Chromium
ensure_chromium() {
	if command -v chromium >/dev/null; then
		log "chromium already installed; leaving it alone"
		return
	fi
	apt_install chromium
	command -v chromium >/dev/null || die "chromium installed but not on PATH"
	log "chromium installed"
}

ensure_postgres
ensure_pgvector
ensure_redis
ensure_chromium
log "ready: postgres://postgres@127.0.0.1:${PG_PORT}/postgres redis://127.0.0.1:${REDIS_PORT}/0"
