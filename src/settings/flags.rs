//! The settings as flags of `orchestrate run`: one flag for each setting of the table that
//! has one, its value checked by the setting's own parser as clap reads it (so that a bad
//! value is clap's error, naming the flag), its names offered for completion.

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::kinds::Raw;
use super::{AnySetting, Values, SETTINGS};

/// Checks a flag's text with its setting's parser; the text is read again into
/// [`Values`] once every flag is parsed.
#[derive(Clone, Copy)]
struct Checked(&'static dyn AnySetting);

impl TypedValueParser for Checked {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        let setting = self.0;
        // clap's own parser for a function words the error as for any flag: `invalid
        // value 'x' for '--timeout <TIMEOUT>': why`.
        let check = move |text: &str| -> Result<String, String> {
            setting
                .read(&mut Values::default(), Raw::Text(text))
                .map(|()| text.to_string())
        };
        check.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let names = self.0.names()?;
        Some(Box::new(names.into_iter().map(PossibleValue::new)))
    }
}

impl clap::Args for Values {
    fn augment_args(cmd: Command) -> Command {
        SETTINGS.iter().fold(cmd, |cmd, &setting| {
            let Some(flag) = setting.surfaces().flag else {
                return cmd;
            };
            let arg = Arg::new(setting.key())
                .long(flag.long)
                .value_name(flag.value_name)
                // As clap's derive writes a one-paragraph doc comment: no final period.
                .help(flag.help.strip_suffix('.').unwrap_or(flag.help))
                .allow_hyphen_values(setting.numeric())
                .value_parser(Checked(setting))
                .action(if flag.repeat {
                    ArgAction::Append
                } else {
                    ArgAction::Set
                });
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for Values {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut values = Values::default();
        values.update_from_arg_matches(matches)?;
        Ok(values)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for &setting in SETTINGS {
            if setting.surfaces().flag.is_none() {
                continue;
            }
            let Some(given) = matches.get_many::<String>(setting.key()) else {
                continue;
            };
            // A repeated flag's values are one list (`--fallback-model a --fallback-model b`).
            let text = given.map(String::as_str).collect::<Vec<_>>().join(",");
            setting
                .read(self, Raw::Text(&text))
                .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Values, String> {
        let cmd = Values::augment_args(Command::new("run").no_binary_name(true));
        let matches = cmd.try_get_matches_from(args).map_err(|e| {
            let rendered = e.render().to_string();
            rendered.lines().next().unwrap_or_default().to_string()
        })?;
        Values::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn every_flag_of_the_table_is_read_into_its_setting() {
        assert_eq!(
            parse(&[
                "--timeout",
                "90s",
                "--max-cost",
                "$0.50",
                "--fallback-model",
                "a",
                "--fallback-model",
                "b",
                "--attempts",
                "3",
                "--sandbox",
                "read-only",
            ]),
            Ok(Values {
                timeout: Some(Duration::from_secs(90)),
                max_cost: crate::units::Usd::new(0.5),
                fallback_models: Some(vec!["a".into(), "b".into()]),
                retries: Some(3),
                sandbox: Some(Some(crate::result::SandboxMode::ReadOnly)),
                ..Values::default()
            })
        );
    }

    #[test]
    fn a_bad_value_is_clap_s_error_naming_the_flag_and_the_reason() {
        assert_eq!(
            parse(&["--timeout", "5"]),
            Err("error: invalid value '5' for '--timeout <TIMEOUT>': invalid duration \"5\": a number needs a unit: did you mean 5s? (units: ms, s, m, h, d)".to_string())
        );
        assert_eq!(
            parse(&["--max-output-bytes", "-5"]),
            Err("error: invalid value '-5' for '--max-output-bytes <MAX_OUTPUT_BYTES>': expected a whole number of at least 1, got \"-5\"".to_string())
        );
        assert_eq!(
            parse(&["--concurrency", "257"]),
            Err("error: invalid value '257' for '--concurrency <CONCURRENCY>': expected a whole number from 1 to 256, got \"257\"".to_string())
        );
    }
}
