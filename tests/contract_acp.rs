//! Contract tests of the real ACP agents (gemini, opencode, claude-agent-acp, codex-acp,
//! pi-acp), each run through `orchestrate run --backend <preset>` against the loopback
//! mock LLM: the scenarios of tests/mock_llm/contract/acp.rs (see docs/contract-tests.md).

mod mock_llm;

fn main() {
    mock_llm::contract::harness::main_needing(mock_llm::contract::acp::all());
}
