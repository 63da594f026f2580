//! The agents shipped in the repository's `agents/` folder, embedded in the binary so a
//! fresh install has something useful to delegate to.

use std::path::PathBuf;

use super::frontmatter::parse_agent_file;
use super::{AgentDef, AgentProblem, Scope};

const FILES: [(&str, &str); 5] = [
    ("explorer", include_str!("../../agents/explorer.md")),
    ("researcher", include_str!("../../agents/researcher.md")),
    ("reviewer", include_str!("../../agents/reviewer.md")),
    ("implementer", include_str!("../../agents/implementer.md")),
    ("tester", include_str!("../../agents/tester.md")),
];

/// The built-in agents, in a fixed order. A file that does not parse is a bug caught by the
/// tests below; in a release it is logged and left out rather than taking every run down.
pub(super) fn builtin_agents() -> Vec<AgentDef> {
    parse_all()
        .into_iter()
        .filter_map(|parsed| {
            parsed
                .inspect_err(|p| tracing::error!(problem = %p, "built-in agent does not parse"))
                .ok()
        })
        .collect()
}

fn parse_all() -> Vec<Result<AgentDef, AgentProblem>> {
    FILES
        .iter()
        .map(|(name, text)| {
            let path = PathBuf::from(format!("<builtin>/{name}.md"));
            parse_agent_file(text, &path, Scope::Builtin)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::AgentSource;
    use pretty_assertions::assert_eq;

    const VOCABULARY: [&str; 7] = ["read", "grep", "find", "ls", "bash", "edit", "write"];

    #[test]
    fn all_five_parse_without_problems() {
        let parsed = parse_all();
        let problems: Vec<String> = parsed
            .iter()
            .filter_map(|r| r.as_ref().err().map(ToString::to_string))
            .collect();
        assert_eq!(problems, Vec::<String>::new());
        let names: Vec<_> = builtin_agents().into_iter().map(|d| d.name).collect();
        assert_eq!(
            names,
            vec![
                "explorer",
                "researcher",
                "reviewer",
                "implementer",
                "tester"
            ]
        );
    }

    #[test]
    fn each_has_a_real_prompt_and_a_one_line_description() {
        for def in builtin_agents() {
            let lines = def.system_prompt.lines().count();
            assert!(
                (30..=70).contains(&lines),
                "{}: prompt has {lines} lines",
                def.name
            );
            for must in ["subagent", "## "] {
                assert!(
                    def.system_prompt.contains(must),
                    "{}: prompt lacks {must:?}",
                    def.name
                );
            }
            assert!(
                !def.description.is_empty() && !def.description.contains('\n'),
                "{}",
                def.name
            );
            assert_eq!(def.source, AgentSource::Builtin);
            assert!(def.enabled);
            // Model and backend come from configuration, never from the shipped files.
            assert_eq!(
                (def.settings.model.as_deref(), def.settings.backend),
                (None, None)
            );
            for tool in &def.tools {
                assert!(
                    VOCABULARY.contains(&tool.name()),
                    "{}: {}",
                    def.name,
                    tool.name()
                );
            }
        }
    }

    #[test]
    fn tools_and_readonly_match_each_role() {
        let got: Vec<(String, Vec<String>, bool)> = builtin_agents()
            .into_iter()
            .map(|d| {
                (
                    d.name,
                    d.tools.iter().map(|t| t.name().to_string()).collect(),
                    d.readonly,
                )
            })
            .collect();
        let v = |tools: &[&str]| tools.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("explorer".into(), v(&["read", "grep", "find", "ls"]), true),
                (
                    "researcher".into(),
                    v(&["read", "grep", "find", "ls", "bash"]),
                    true
                ),
                (
                    "reviewer".into(),
                    v(&["read", "grep", "find", "ls", "bash"]),
                    true
                ),
                (
                    "implementer".into(),
                    v(&["read", "grep", "find", "ls", "bash", "edit", "write"]),
                    false
                ),
                (
                    "tester".into(),
                    v(&["read", "grep", "find", "ls", "bash", "edit", "write"]),
                    false
                ),
            ]
        );
    }
}
