//! One tool vocabulary for every agent (`read, grep, find, ls, bash, edit, write`), and the
//! permission policy each backend maps to its own flags.

use super::AgentBrief;

/// A tool named in an agent file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    Read,
    Grep,
    Find,
    Ls,
    Bash,
    Edit,
    Write,
    /// A backend-native name (`WebFetch`, `todowrite`, …), passed through unchanged.
    Native(String),
}

impl Tool {
    /// Reads both the vocabulary and Claude Code's names (`Read`, `Glob`, `MultiEdit`…).
    pub fn parse(name: &str) -> Tool {
        match name.trim() {
            "read" | "Read" => Tool::Read,
            "grep" | "Grep" => Tool::Grep,
            "find" | "Find" | "glob" | "Glob" => Tool::Find,
            "ls" | "LS" | "Ls" | "list" => Tool::Ls,
            "bash" | "Bash" | "shell" => Tool::Bash,
            "edit" | "Edit" | "MultiEdit" | "multiedit" | "patch" => Tool::Edit,
            "write" | "Write" => Tool::Write,
            other => Tool::Native(other.to_string()),
        }
    }

    /// Its name in the vocabulary (a native name as written).
    pub fn name(&self) -> &str {
        match self {
            Tool::Read => "read",
            Tool::Grep => "grep",
            Tool::Find => "find",
            Tool::Ls => "ls",
            Tool::Bash => "bash",
            Tool::Edit => "edit",
            Tool::Write => "write",
            Tool::Native(name) => name,
        }
    }

    pub fn writes(&self) -> bool {
        matches!(self, Tool::Edit | Tool::Write)
    }
}

/// What an agent may do, derived once from its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Permissions {
    /// Tools in the order written, without duplicates. Empty = the backend's default set.
    pub tools: Vec<Tool>,
    /// No writes through any tool: the agent says `readonly: true`, or lists tools and none
    /// of them can change anything.
    pub readonly: bool,
}

impl Permissions {
    pub(crate) fn of(agent: &AgentBrief) -> Permissions {
        Permissions::new(&agent.tools, agent.readonly)
    }

    /// The permissions of an agent that lists `listed` tools and says `readonly`.
    pub(crate) fn new(listed: &[Tool], readonly: bool) -> Permissions {
        let mut tools: Vec<Tool> = Vec::new();
        for t in listed {
            if !tools.contains(t) {
                tools.push(t.clone());
            }
        }
        let lists_no_writer = !tools.is_empty()
            && !tools
                .iter()
                .any(|t| t.writes() || *t == Tool::Bash || matches!(t, Tool::Native(_)));
        Permissions {
            readonly: readonly || lists_no_writer,
            tools,
        }
    }

    pub(crate) fn has(&self, tool: &Tool) -> bool {
        self.tools.contains(tool)
    }

    /// Shell access was asked for (or is in the backend's default set).
    pub(crate) fn wants_bash(&self) -> bool {
        self.tools.is_empty() || self.has(&Tool::Bash)
    }

    /// The tools the agent may use once read-only has removed the writers.
    pub(crate) fn granted(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .filter(|t| !(self.readonly && t.writes()))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(tools: &[&str], readonly: bool) -> AgentBrief {
        crate::backends::test_support::agent(tools, readonly, "P")
    }

    #[test]
    fn claude_names_map_to_the_vocabulary() {
        let p = Permissions::of(&agent(
            &["Read", "Grep", "Glob", "LS", "read", "WebFetch"],
            false,
        ));
        assert_eq!(
            p.tools,
            vec![
                Tool::Read,
                Tool::Grep,
                Tool::Find,
                Tool::Ls,
                Tool::Native("WebFetch".into())
            ]
        );
    }

    #[test]
    fn an_agent_listing_only_readers_is_read_only() {
        assert!(Permissions::of(&agent(&["read", "grep"], false)).readonly);
        assert!(!Permissions::of(&agent(&["read", "bash"], false)).readonly);
        assert!(!Permissions::of(&agent(&[], false)).readonly);
        let p = Permissions::of(&agent(&["read", "edit", "write", "bash"], true));
        assert!(p.readonly);
        assert_eq!(p.granted(), vec![Tool::Read, Tool::Bash]);
    }
}
