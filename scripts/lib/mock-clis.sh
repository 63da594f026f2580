# shellcheck shell=bash
# Sourced by scripts/demo and scripts/playground: finds or builds orchestrate and the mock
# LLM, starts the mock, and points one agent CLI at it through files in a private folder.
# The settings are the ones the contract tests use (tests/mock_llm/contract/clis/*.rs).

say() { printf '==> %s\n' "$*" >&2; }

# mock_binaries ROOT: sets `orchestrate` and `mock_llm`. DEMO_ORCHESTRATE and DEMO_MOCK_LLM
# (the test suite's own builds) win; else the release builds. orchestrate is built on its
# own, so that the binary `cargo build --release` (or `cargo install --path .`) made is
# reused as it is: built together with an example, it would be built again with the
# features of the test dependencies.
mock_binaries() {
	local root="$1"
	if [ -n "${DEMO_ORCHESTRATE:-}" ] && [ -n "${DEMO_MOCK_LLM:-}" ]; then
		orchestrate="$DEMO_ORCHESTRATE"
		mock_llm="$DEMO_MOCK_LLM"
		return
	fi
	say "building orchestrate (release; nothing to do after \`cargo build --release\`)"
	(cd "$root" && cargo build --release --bin orchestrate) >&2
	say "building the mock LLM (release; the first time takes a minute or more)"
	(cd "$root" && cargo build --release --example mock_llm) >&2
	orchestrate="$root/target/release/orchestrate"
	mock_llm="$root/target/release/examples/mock_llm"
}

# cli_binary CLI ROOT: sets `cli_bin` to the pinned CLI that scripts/install-agent-clis
# installed (ORCHESTRATE_CONTRACT_<CLI>), installing it the first time.
cli_binary() {
	local cli="$1" root="$2" var
	var="ORCHESTRATE_CONTRACT_$(printf '%s' "$cli" | tr '[:lower:]' '[:upper:]')"
	local cache="${ORCHESTRATE_CLI_CACHE:-$HOME/.cache/orchestrate-clis}"
	if [ -z "${!var:-}" ] && [ -f "$cache/env.sh" ]; then
		# shellcheck disable=SC1091
		. "$cache/env.sh"
	fi
	if [ -z "${!var:-}" ] || [ ! -x "${!var}" ]; then
		say "installing the pinned $cli (first time only) into $cache"
		"$root/scripts/install-agent-clis" "$cli" >&2
		# shellcheck disable=SC1091
		. "$cache/env.sh"
	fi
	cli_bin="${!var:?scripts/install-agent-clis did not install $cli}"
}

# start_mock SCRIPT DIR: starts the mock with SCRIPT, its log in DIR/mock.log; sets
# `mock_pid` and `mock_url`. stop_mock stops it.
start_mock() {
	local script="$1" dir="$2"
	rm -f "$dir/mock-url"
	rm -f "$dir/requests.jsonl"
	"$mock_llm" --script "$script" --url-file "$dir/mock-url" --log "$dir/requests.jsonl" >"$dir/mock.log" 2>&1 &
	mock_pid=$!
	for _ in $(seq 1 100); do
		[ -s "$dir/mock-url" ] && break
		if ! kill -0 "$mock_pid" 2>/dev/null; then
			cat "$dir/mock.log" >&2
			return 1
		fi
		sleep 0.1
	done
	mock_url="$(cat "$dir/mock-url")"
}

stop_mock() {
	if [ -n "${mock_pid:-}" ]; then
		kill "$mock_pid" 2>/dev/null || true
		wait "$mock_pid" 2>/dev/null || true
		mock_pid=""
	fi
}

# mock_cli_env CLI URL DIR: writes CLI's settings pointing at the mock under DIR (a
# private HOME) and sets `cli_env` (VAR=VALUE words for `env`) and `cli_model` (the
# --model to run with). Outbound traffic of the CLI to any other host goes to the mock
# as a proxy, which refuses it: nothing leaves the machine.
mock_cli_env() {
	local cli="$1" url="$2" dir="$3"
	mkdir -p "$dir/home/.config"
	cli_env=(
		"HOME=$dir/home" "XDG_CONFIG_HOME=$dir/home/.config"
		"HTTPS_PROXY=$url" "https_proxy=$url" "HTTP_PROXY=$url" "http_proxy=$url"
		"NO_PROXY=127.0.0.1,localhost" "no_proxy=127.0.0.1,localhost" "ALL_PROXY=" "all_proxy="
	)
	case "$cli" in
	pi)
		mkdir -p "$dir/pi-agent"
		cat >"$dir/pi-agent/models.json" <<JSON
{"providers": {"mock": {
  "baseUrl": "$url/v1", "api": "openai-completions", "apiKey": "mock-key",
  "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false, "maxTokensField": "max_tokens"},
  "models": [{"id": "scripted-mock", "name": "Scripted mock (not an LLM)", "reasoning": false,
              "contextWindow": 128000, "maxTokens": 4096,
              "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]}}}
JSON
		echo '{"retry": {"enabled": false}}' >"$dir/pi-agent/settings.json"
		cli_env+=("PI_CODING_AGENT_DIR=$dir/pi-agent" PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 PI_TELEMETRY=0)
		cli_model=mock/scripted-mock
		;;
	claude)
		mkdir -p "$dir/home/.claude"
		cli_env+=("ANTHROPIC_BASE_URL=$url" ANTHROPIC_API_KEY=mock-key "CLAUDE_CONFIG_DIR=$dir/home/.claude"
			CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1
			DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_MAX_RETRIES=0 IS_SANDBOX=1)
		cli_model=claude-sonnet-4-5
		;;
	codex)
		mkdir -p "$dir/home/.codex"
		cat >"$dir/home/.codex/config.toml" <<TOML
model = "gpt-5.5"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "$url/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
TOML
		cli_env+=("CODEX_HOME=$dir/home/.codex" MOCK_API_KEY=mock-key)
		cli_model=gpt-5.5
		;;
	gemini)
		mkdir -p "$dir/home/.gemini"
		echo '{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}, "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}' \
			>"$dir/home/.gemini/settings.json"
		cli_env+=("GOOGLE_GEMINI_BASE_URL=$url" GEMINI_API_KEY=mock-key)
		cli_model=gemini-2.5-flash
		;;
	opencode)
		local config="$dir/home/.config/opencode"
		mkdir -p "$config/node_modules"
		cat >"$config/opencode.json" <<JSON
{"\$schema": "https://opencode.ai/config.json",
 "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
   "options": {"baseURL": "$url/v1", "apiKey": "mock-key"},
   "models": {"mock-model": {"name": "Mock model",
     "cost": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 0}}}}},
 "model": "mock/mock-model", "autoupdate": false, "share": "disabled"}
JSON
		# Else opencode installs its plugin package from npm first, silently, for seconds.
		echo '{"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}' >"$config/package-lock.json"
		cli_env+=(OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1
			OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_SHARE=1)
		cli_model=mock/mock-model
		;;
	*)
		say "no mock settings for $cli (pi, claude, codex, gemini or opencode)"
		return 2
		;;
	esac
	local var
	var="ORCHESTRATE_$(printf '%s' "$cli" | tr '[:lower:]' '[:upper:]')_BIN"
	cli_env+=("$var=$cli_bin")
}

# user_state_dir FROM: where orchestrate keeps this user's runs, as orchestrate chooses it
# when started in FROM, so that `orchestrate runs` and `orchestrate show` find the runs
# made here (the CLIs themselves get a private HOME).
user_state_dir() {
	local dir
	if [ -n "${ORCHESTRATE_STATE_DIR:-}" ]; then
		dir="$ORCHESTRATE_STATE_DIR"
	elif [ -n "${XDG_STATE_HOME:-}" ]; then
		dir="$XDG_STATE_HOME/orchestrate"
	else
		dir="${HOME:?HOME is not set}/.local/state/orchestrate"
	fi
	case "$dir" in
	/*) printf '%s\n' "$dir" ;;
	*) printf '%s\n' "$1/$dir" ;;
	esac
}

# run_ids STATE: the run folders in STATE, one id a line, sorted (compare two listings to
# learn which runs a command made).
run_ids() {
	ls "$1/runs" 2>/dev/null | grep -E '^[0-9a-f]{8}$' | sort || true
}

# orchestrate_command: how the user can call orchestrate to read the runs made here:
# `orchestrate` when one is on PATH (an installed one reads the same state directory),
# else the path of the one used here.
orchestrate_command() {
	if command -v orchestrate >/dev/null 2>&1; then
		echo orchestrate
	else
		echo "$orchestrate"
	fi
}
