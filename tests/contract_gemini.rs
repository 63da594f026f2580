//! Contract tests of the real gemini, run through `orchestrate run` against the loopback mock
//! LLM: the shared scenarios of tests/mock_llm/contract/scenarios.rs, with gemini described
//! in tests/mock_llm/contract/clis/gemini.rs (see docs/contract-tests.md).

mod mock_llm;

fn main() {
    mock_llm::contract::harness::main(&mock_llm::contract::clis::gemini::GEMINI);
}
