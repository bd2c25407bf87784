# shellcheck shell=bash
# moto's server as the real control plane tier's AWS (SQS in both protocols, EC2, STS, Auto Scaling), with its
# SigV4 check on, so that a signer spotdrain did not write judges spotdrain's. Sourced by install, start, stop
# and the tier's scripts; test-only: a pinned venv in the cache outside the repository, never linked into or
# shipped with spotdrain.
#
#   moto_install            the venv (idempotent; keyed by moto's version and requirements.txt's hash)
#   moto_start DIR          starts the server on 127.0.0.1 on a free port; DIR gets moto.pid, moto.url, moto.log
#                           and credentials.env (an IAM user's access key that moto's check accepts)
#   moto_stop DIR           stops it by its PID
#
# Environment: REALK8S_CACHE (default /var/cache/spotdrain/realk8s), PYTHON (default python3),
# MOTO_START_TIMEOUT (seconds, default 60: the first start imports a lot on a loaded 2-core machine).

MOTO_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOTO_REQUIREMENTS=$MOTO_LIB_DIR/requirements.txt
MOTO_VERSION=$(sed -n 's/^moto==\([^ ]*\) .*/\1/p' "$MOTO_REQUIREMENTS")
MOTO_CACHE=${REALK8S_CACHE:-/var/cache/spotdrain/realk8s}
MOTO_HOME=$MOTO_CACHE/moto-$MOTO_VERSION
MOTO_VENV=$MOTO_HOME/venv
# moto's default account, which every resource it makes belongs to (queue URLs, ARNs, GetCallerIdentity).
MOTO_ACCOUNT=123456789012
MOTO_REGION=us-east-1
# The IAM user moto_start creates and whose key it hands out; its policy allows everything, so that what moto
# refuses is the signature, never a permission.
MOTO_USER=spotdrain-test

moto_log() {
	printf 'moto: %s\n' "$*" >&2
}

moto_requirements_hash() {
	sha256sum "$MOTO_REQUIREMENTS" | cut -d' ' -f1
}

# True when the venv was completed for this requirements file (the stamp is written last).
moto_installed() {
	[ -x "$MOTO_VENV/bin/moto_server" ] &&
		[ "$(cat "$MOTO_HOME/requirements.sha256" 2>/dev/null)" = "$(moto_requirements_hash)" ]
}

moto_install() {
	local py=${PYTHON:-python3} hash
	moto_installed && return 0
	mkdir -p "$MOTO_CACHE"
	(
		# One installer at a time per version; the second finds the first one's venv.
		exec 9>"$MOTO_HOME.lock"
		flock 9
		moto_installed && exit 0
		hash=$(moto_requirements_hash)
		moto_log "installing moto $MOTO_VERSION into $MOTO_VENV (requirements $hash)"
		# A venv is not relocatable (its scripts name its path): it is made where it stays, and only the stamp,
		# written last, says it is complete.
		rm -rf "$MOTO_HOME"
		mkdir -p "$MOTO_HOME"
		"$py" -m venv "$MOTO_VENV"
		"$MOTO_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
			--require-hashes --only-binary=:all: -r "$MOTO_REQUIREMENTS"
		echo "$hash" >"$MOTO_HOME/requirements.sha256.new"
		mv "$MOTO_HOME/requirements.sha256.new" "$MOTO_HOME/requirements.sha256"
	)
}

# moto_wait SECONDS COMMAND...: COMMAND until it succeeds, every 0.1 s, at most SECONDS.
moto_wait() {
	local limit=$1 deadline
	shift
	deadline=$(($(date +%s%N) + limit * 1000000000))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s%N)" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

# The port werkzeug bound (asked for port 0), from its startup line.
moto_port_from_log() {
	sed -n 's/.*Running on http:\/\/127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1
}

# Running (a zombie its parent has not reaped yet is not).
moto_alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# moto_start DIR: see the head of this file. Fails (and stops what it started) when the server does not come up
# within MOTO_START_TIMEOUT seconds or the identities cannot be made. The URL is plain http on loopback, which
# spotdrain allows for loopback only.
moto_start() {
	local dir=$1 pid port url limit=${MOTO_START_TIMEOUT:-60} creds
	moto_installed || { moto_log "not installed: run tests/realk8s/moto/install"; return 1; }
	mkdir -p "$dir"
	rm -f "$dir/moto.pid" "$dir/moto.url" "$dir/credentials.env"
	# The check starts off so that bootstrap.py can make the identities, and is switched on below, before the
	# URL is published. Port 0: the kernel's free port, read back from the log (no race with another server).
	env INITIAL_NO_AUTH_ACTION_COUNT=inf AWS_DEFAULT_REGION=$MOTO_REGION \
		"$MOTO_VENV/bin/moto_server" -H 127.0.0.1 -p 0 >"$dir/moto.log" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/moto.pid"
	if ! moto_wait "$limit" eval '[ -n "$(moto_port_from_log "$dir/moto.log")" ] || ! moto_alive '"$pid"; then
		moto_log "no port in $dir/moto.log within ${limit}s"
		moto_stop "$dir"
		return 1
	fi
	port=$(moto_port_from_log "$dir/moto.log")
	[ -n "$port" ] || { moto_log "moto_server exited: $(tail -n 5 "$dir/moto.log")"; moto_stop "$dir"; return 1; }
	url=http://127.0.0.1:$port
	if ! moto_wait "$limit" curl -sf -o /dev/null "$url/moto-api/"; then
		moto_log "$url does not answer within ${limit}s"
		moto_stop "$dir"
		return 1
	fi
	if ! creds=$("$MOTO_VENV/bin/python" "$MOTO_LIB_DIR/bootstrap.py" "$url" "$MOTO_USER" spotdrain-web-identity \
		2>>"$dir/moto.log"); then
		moto_log "could not make the identities (see $dir/moto.log)"
		moto_stop "$dir"
		return 1
	fi
	# From here on every request moto serves is checked: its signature against the key's secret, and the
	# key's policies.
	if ! curl -sf -o /dev/null -X POST -H 'Content-Type: text/plain' --data-binary 0 "$url/moto-api/reset-auth"; then
		moto_log "could not switch the SigV4 check on"
		moto_stop "$dir"
		return 1
	fi
	{
		echo "# moto at $url (pid $pid), SigV4 check on; account $MOTO_ACCOUNT"
		echo "$creds"
		echo "AWS_REGION=$MOTO_REGION"
		echo "AWS_DEFAULT_REGION=$MOTO_REGION"
		echo "AWS_ENDPOINT_URL=$url"
		echo "MOTO_ACCOUNT=$MOTO_ACCOUNT"
	} >"$dir/credentials.env.new"
	chmod 0600 "$dir/credentials.env.new"
	mv "$dir/credentials.env.new" "$dir/credentials.env"
	echo "$url" >"$dir/moto.url.new"
	mv "$dir/moto.url.new" "$dir/moto.url"
	moto_log "moto $MOTO_VERSION at $url (pid $pid)"
}

# moto_stop DIR: SIGTERM to the PID moto_start wrote, SIGKILL after 10 s; the PID file is removed.
moto_stop() {
	local dir=$1 pid
	[ -f "$dir/moto.pid" ] || return 0
	pid=$(cat "$dir/moto.pid")
	if moto_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		if ! moto_wait 10 eval '! moto_alive '"$pid"; then
			kill -KILL "$pid" 2>/dev/null || true
			moto_wait 5 eval '! moto_alive '"$pid" || true
		fi
	fi
	# Reaps it when this shell started it.
	wait "$pid" 2>/dev/null || true
	rm -f "$dir/moto.pid" "$dir/moto.url"
}
