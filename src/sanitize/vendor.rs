//! Layer (a): prefixed vendor tokens, masked wherever they appear. Each keeps its public
//! prefix (`ghp_[REDACTED]`), which names the vendor and kind and is the same for every
//! user; the rest of the token, to its last character, becomes the mask.
//!
//! A rule's regex is a literal prefix and the token's alphabet with a minimum length: the
//! alphabet runs greedily to the token's end, so no trailing character survives, and the
//! `accept` check throws out words that happen to share the prefix (`sk-spinner-…`).

use super::rules::token_rules;
use super::rules::{
    alnum, always, ends_here, mixed_alnum, not_placeholder, random, Candidate, TokenRule,
};
use super::value::{has_digit, has_upper_and_lower, is_filler, is_hex_or_uuid};

pub(crate) const RULES: &[TokenRule] = token_rules! {
    // Anthropic API keys, `sk-ant-api03-…`.
    "anthropic-api-key" ["sk-ant-api"] mixed_alnum
        r"{LEAD}sk-ant-api\d\d-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Anthropic Admin API keys, `sk-ant-admin01-…`.
    "anthropic-admin-key" ["sk-ant-admin"] mixed_alnum
        r"{LEAD}sk-ant-admin\d\d-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Anthropic OAuth access tokens (Claude Code logins), `sk-ant-oat01-…`.
    "anthropic-oauth-access-token" ["sk-ant-oat"] mixed_alnum
        r"{LEAD}sk-ant-oat\d\d-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Anthropic OAuth refresh tokens, `sk-ant-ort01-…`.
    "anthropic-oauth-refresh-token" ["sk-ant-ort"] mixed_alnum
        r"{LEAD}sk-ant-ort\d\d-(?P<secret>[A-Za-z0-9_-]{20,})";
    // OpenRouter keys, `sk-or-v1-` and 64 hex digits.
    "openrouter-api-key" ["sk-or-v1-"] alnum
        r"{LEAD}sk-or-v1-(?P<secret>[A-Za-z0-9]{32,})";
    // OpenAI project keys, `sk-proj-…`.
    "openai-project-key" ["sk-proj-"] mixed_alnum
        r"{LEAD}sk-proj-(?P<secret>[A-Za-z0-9_-]{20,})";
    // OpenAI service-account keys, `sk-svcacct-…`.
    "openai-service-account-key" ["sk-svcacct-"] mixed_alnum
        r"{LEAD}sk-svcacct-(?P<secret>[A-Za-z0-9_-]{20,})";
    // OpenAI admin keys, `sk-admin-…`.
    "openai-admin-key" ["sk-admin-"] mixed_alnum
        r"{LEAD}sk-admin-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Any other `sk-` key: OpenAI user keys (`sk-…T3BlbkFJ…`), DeepSeek and compatible APIs
    // (`sk-` and 32 hex digits), Anthropic keys of kinds not listed above.
    "openai-api-key" ["sk-"] sk_key
        r"{LEAD}sk-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Groq keys, `gsk_…`.
    "groq-api-key" ["gsk_"] mixed_alnum
        r"{LEAD}gsk_(?P<secret>[A-Za-z0-9]{40,})";
    // xAI keys, `xai-…`.
    "xai-api-key" ["xai-"] mixed_alnum
        r"{LEAD}xai-(?P<secret>[A-Za-z0-9]{60,})";
    // Hugging Face user (`hf_…`) and organization (`api_org_…`) tokens.
    "huggingface-token" ["hf_", "api_org_"] mixed_case
        r"{LEAD}(?:hf_|api_org_)(?P<secret>[A-Za-z]{30,})(?-u:\b)";
    // Replicate tokens, `r8_…`.
    "replicate-api-token" ["r8_"] alnum
        r"{LEAD}r8_(?P<secret>[A-Za-z0-9]{30,})";
    // Perplexity keys, `pplx-…`.
    "perplexity-api-key" ["pplx-"] alnum
        r"{LEAD}pplx-(?P<secret>[A-Za-z0-9]{40,})";
    // AWS access key ids (`AKIA…`, temporary `ASIA…`); the documentation's `…EXAMPLE` ids are
    // left alone.
    "aws-access-key-id" ["AKIA", "ASIA", "ABIA", "ACCA", "A3T"] not_example
        r"{LEAD}(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])(?P<secret>[A-Z0-9]{16})(?-u:\b)";
    // AWS STS session tokens wherever they appear, by their fixed opening bytes.
    "aws-sts-session-token" ["IQoJb3JpZ2lu", "FwoGZXIvYXdz"] always
        r"{LEAD}(?P<secret>(?:IQoJb3JpZ2lu|FwoGZXIvYXdz)(?:[A-Za-z0-9+/=]|\\/|%2[bBfF]|%3[dD]){40,})";
    // GitHub classic personal access tokens, `ghp_…`.
    "github-pat" ["ghp_"] always
        r"{LEAD}ghp_(?P<secret>[A-Za-z0-9]{36,})";
    // GitHub OAuth tokens (`gh auth token`), `gho_…`.
    "github-oauth-token" ["gho_"] always
        r"{LEAD}gho_(?P<secret>[A-Za-z0-9]{36,})";
    // GitHub App user-to-server (`ghu_…`) and installation (`ghs_…`) tokens.
    "github-app-token" ["ghu_", "ghs_"] always
        r"{LEAD}gh[us]_(?P<secret>[A-Za-z0-9]{36,})";
    // GitHub refresh tokens, `ghr_…`.
    "github-refresh-token" ["ghr_"] always
        r"{LEAD}ghr_(?P<secret>[A-Za-z0-9]{36,})";
    // GitHub fine-grained personal access tokens, `github_pat_…`.
    "github-fine-grained-pat" ["github_pat_"] always
        r"{LEAD}github_pat_(?P<secret>[A-Za-z0-9_]{22,})";
    // GitLab personal, project and group access tokens, `glpat-…`.
    "gitlab-pat" ["glpat-"] alnum_or_mixed
        r"{LEAD}glpat-(?P<secret>[A-Za-z0-9_.-]{20,})";
    // GitLab runner authentication (`glrt-…`) and registration (`GR1348941…`) tokens.
    "gitlab-runner-token" ["glrt-", "GR1348941"] alnum_or_mixed
        r"{LEAD}(?:glrt-|GR1348941)(?P<secret>[A-Za-z0-9_.-]{20,})";
    // Other GitLab tokens: pipeline trigger, deploy, CI job, feed, incoming mail, agent, OAuth
    // app secret, SCIM, feature flags.
    "gitlab-token" [
        "glptt-", "gldt-", "glcbt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "glffct-"
    ] alnum_or_mixed
        r"{LEAD}(?:glptt|gldt|glcbt|glft|glimt|glagent|gloas|glsoat|glffct)-(?P<secret>[A-Za-z0-9_.-]{20,})";
    // Slack configuration access and refresh tokens, `xoxe.xoxp-…`, `xoxe-…`.
    "slack-config-token" ["xoxe"] digit
        r"{LEAD}xoxe(?:\.xox[bp])?-(?P<secret>[A-Za-z0-9-]{20,})";
    // Slack bot, user, workspace and legacy tokens, `xoxb-…`, `xoxp-…`.
    "slack-token" ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxo-"] digit
        r"{LEAD}xox[bparso]-(?P<secret>[A-Za-z0-9-]{10,})";
    // Slack app-level tokens, `xapp-…`.
    "slack-app-token" ["xapp-"] digit
        r"{LEAD}xapp-(?P<secret>[A-Za-z0-9-]{20,})";
    // Slack incoming webhooks and workflow triggers; `\/` is how JSON writers that escape
    // slashes print them.
    "slack-webhook" ["hooks.slack.com"] webhook
        r"hooks\.slack\.com(?:\\?/|%2[fF]|%252[fF])(?:services|workflows|triggers)(?:\\?/|%2[fF]|%252[fF])(?P<secret>(?:[A-Za-z0-9_-]|\\?/|%2[fF]|%252[fF]){8,})";
    // Discord webhooks (id and token).
    "discord-webhook" ["discord.com", "discordapp.com"] webhook
        r"discord(?:app)?\.com(?:\\?/|%2[fF]|%252[fF])api(?:\\?/|%2[fF]|%252[fF])(?:v\d+(?:\\?/|%2[fF]|%252[fF]))?webhooks(?:\\?/|%2[fF]|%252[fF])(?P<secret>(?:[A-Za-z0-9_-]|\\?/|%2[fF]|%252[fF]){20,})";
    // Microsoft Teams incoming webhooks.
    "microsoft-teams-webhook" ["webhook.office.com"] webhook
        r"webhook\.office\.com(?:\\?/|%2[fF]|%252[fF])webhookb2(?:\\?/|%2[fF]|%252[fF])(?P<secret>(?:[A-Za-z0-9@_-]|\\?/|%2[fF]|%252[fF]|%40|%2540){20,})";
    // Zapier catch hooks.
    "zapier-webhook" ["hooks.zapier.com"] webhook
        r"hooks\.zapier\.com(?:\\?/|%2[fF]|%252[fF])hooks(?:\\?/|%2[fF]|%252[fF])catch(?:\\?/|%2[fF]|%252[fF])(?P<secret>(?:[A-Za-z0-9_-]|\\?/|%2[fF]|%252[fF]){6,})";
    // Stripe secret keys, live and test; publishable `pk_` keys are public and left alone.
    "stripe-secret-key" ["sk_live_", "sk_test_"] alnum
        r"{LEAD}sk_(?:live|test)_(?P<secret>[A-Za-z0-9]{16,})";
    // Stripe restricted keys.
    "stripe-restricted-key" ["rk_live_", "rk_test_"] alnum
        r"{LEAD}rk_(?:live|test)_(?P<secret>[A-Za-z0-9]{16,})";
    // Stripe (and Svix) webhook signing secrets, `whsec_…`.
    "stripe-webhook-secret" ["whsec_"] alnum
        r"{LEAD}whsec_(?P<secret>(?:[A-Za-z0-9+/=]|\\/){24,})";
    // Google API keys (Gemini, Maps, Firebase), `AIza…`.
    "google-api-key" ["AIza"] alnum
        r"{LEAD}AIza(?P<secret>[A-Za-z0-9_-]{30,})";
    // Google OAuth access tokens, `ya29.…`.
    "google-oauth-access-token" ["ya29."] random
        r"{LEAD}ya29\.(?P<secret>[A-Za-z0-9_-]{20,})";
    // Google OAuth client secrets, `GOCSPX-…`.
    "google-oauth-client-secret" ["GOCSPX-"] always
        r"{LEAD}GOCSPX-(?P<secret>[A-Za-z0-9_-]{20,})";
    // Google OAuth refresh tokens, `1//0…`.
    "google-oauth-refresh-token" ["1//0"] mixed_alnum
        r"{LEAD}1//0(?P<secret>[A-Za-z0-9_-]{30,})";
    // npm access tokens, `npm_…`.
    "npm-token" ["npm_"] alnum
        r"{LEAD}npm_(?P<secret>[A-Za-z0-9]{36,})";
    // PyPI upload tokens, `pypi-AgE…`.
    "pypi-token" ["pypi-AgE"] always
        r"{LEAD}pypi-(?P<secret>AgE[A-Za-z0-9_-]{50,})";
    // crates.io API tokens, `cio` and 32 characters.
    "crates-io-token" ["cio"] mixed_alnum
        r"{LEAD}cio(?P<secret>[A-Za-z0-9]{32})(?-u:\b)";
    // RubyGems API keys, `rubygems_…`.
    "rubygems-api-key" ["rubygems_"] always
        r"{LEAD}rubygems_(?P<secret>[a-f0-9]{48})(?-u:\b)";
    // NuGet API keys, `oy2…`.
    "nuget-api-key" ["oy2"] alnum
        r"{LEAD}oy2(?P<secret>[a-z0-9]{43})(?-u:\b)";
    // Clojars deploy tokens, `CLOJARS_…`.
    "clojars-token" ["CLOJARS_"] alnum
        r"{LEAD}CLOJARS_(?P<secret>[a-z0-9]{60})(?-u:\b)";
    // Docker Hub personal and organization access tokens, `dckr_pat_…`.
    "dockerhub-token" ["dckr_pat_", "dckr_oat_"] always
        r"{LEAD}dckr_(?:pat|oat)_(?P<secret>[A-Za-z0-9_-]{20,})";
    // JFrog Artifactory API keys, `AKCp…`.
    "artifactory-api-key" ["AKCp"] alnum
        r"{LEAD}AKCp(?P<secret>[A-Za-z0-9]{60,})";
    // DigitalOcean personal, OAuth and refresh tokens, `dop_v1_…`.
    "digitalocean-token" ["dop_v1_", "doo_v1_", "dor_v1_"] always
        r"{LEAD}do[opr]_v1_(?P<secret>[a-f0-9]{64})(?-u:\b)";
    // SendGrid API keys, `SG.….…`.
    "sendgrid-api-key" ["SG."] alnum
        r"{LEAD}SG\.(?P<secret>[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{20,})";
    // Brevo (Sendinblue) API and SMTP keys.
    "brevo-api-key" ["xkeysib-", "xsmtpsib-"] always
        r"{LEAD}x(?:keysib|smtpsib)-(?P<secret>[a-f0-9]{64}-[A-Za-z0-9]{16})";
    // Twilio API key SIDs, `SK` and 32 hex digits.
    "twilio-api-key" ["SK"] alnum
        r"{LEAD}SK(?P<secret>[0-9a-fA-F]{32})(?-u:\b)";
    // Mailgun private API keys, `key-` and 32 hex digits.
    "mailgun-api-key" ["key-"] alnum
        r"{LEAD}key-(?P<secret>[0-9a-f]{32})(?-u:\b)";
    // Mailchimp API keys, 32 hex digits and `-us<N>`.
    "mailchimp-api-key" [
        "-us1", "-us2", "-us3", "-us4", "-us5", "-us6", "-us7", "-us8", "-us9"
    ] alnum
        r"{LEAD}(?P<secret>[0-9a-f]{32}-us\d{1,2})(?-u:\b)";
    // Shopify access tokens and shared secrets.
    "shopify-token" ["shpat_", "shpca_", "shppa_", "shpss_"] always
        r"{LEAD}shp(?:at|ca|pa|ss)_(?P<secret>[a-fA-F0-9]{32,})";
    // Atlassian (Jira, Confluence) API tokens, `ATATT3…`.
    "atlassian-api-token" ["ATATT3", "ATCTT3"] alnum
        r"{LEAD}AT[AC]TT3(?P<secret>[A-Za-z0-9_=-]{60,})";
    // Bitbucket app passwords, `ATBB…`.
    "bitbucket-app-password" ["ATBB"] alnum
        r"{LEAD}ATBB(?P<secret>[A-Za-z0-9_=.-]{24,})";
    // Linear API keys and OAuth tokens.
    "linear-api-key" ["lin_api_", "lin_oauth_"] alnum
        r"{LEAD}lin_(?:api|oauth)_(?P<secret>[A-Za-z0-9]{32,})";
    // Notion integration tokens, `ntn_…` and the older `secret_…`.
    "notion-token" ["ntn_", "secret_"] mixed_alnum
        r"{LEAD}(?:ntn_|secret_)(?P<secret>[A-Za-z0-9]{40,})";
    // Vercel personal, integration, app and API tokens, `vcp_…`.
    "vercel-token" ["vcp_", "vci_", "vca_", "vcr_", "vck_"] alnum
        r"{LEAD}vc[pcairk]_(?P<secret>[A-Za-z0-9]{24,})";
    // Netlify access tokens, `nfp_…`.
    "netlify-token" ["nfp_", "nfo_", "nfc_", "nfu_"] alnum
        r"{LEAD}nf[pocu]_(?P<secret>[A-Za-z0-9]{30,})";
    // Heroku API keys, `HRKU-…`.
    "heroku-api-key" ["HRKU-"] always
        r"{LEAD}HRKU-(?P<secret>[A-Za-z0-9_-]{40,})";
    // Doppler personal, service, CLI, service-account, SCIM and audit tokens.
    "doppler-token" ["dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."] alnum
        r"{LEAD}dp\.(?:pt|st|ct|sa|scim|audit)\.(?P<secret>[A-Za-z0-9._-]{30,})";
    // HashiCorp Vault service, batch and recovery tokens, `hvs.…`.
    "vault-token" ["hvs.", "hvb.", "hvr."] alnum
        r"{LEAD}hv[sbr]\.(?P<secret>[A-Za-z0-9_-]{20,})";
    // Terraform Cloud / HCP Terraform API tokens, `….atlasv1.…`.
    "terraform-cloud-token" [".atlasv1."] always
        r"{LEAD}(?P<secret>[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,})";
    // Pulumi access tokens, `pul-…`.
    "pulumi-token" ["pul-"] alnum
        r"{LEAD}pul-(?P<secret>[a-f0-9]{40})(?-u:\b)";
    // Postman API keys, `PMAK-…`.
    "postman-api-key" ["PMAK-"] always
        r"{LEAD}PMAK-(?P<secret>[A-Za-z0-9]{20,}-[A-Za-z0-9]{20,})";
    // Databricks personal access tokens, `dapi…`.
    "databricks-token" ["dapi"] alnum
        r"{LEAD}dapi(?P<secret>[a-f0-9]{32}(?:-\d+)?)(?-u:\b)";
    // Azure storage account keys in connection strings, `AccountKey=…`.
    "azure-storage-account-key" ["AccountKey="] not_placeholder
        r"AccountKey=(?P<secret>(?:[A-Za-z0-9+/]|\\/){40,}={0,2})";
    // Azure Service Bus, Event Hubs and IoT Hub shared access keys.
    "azure-shared-access-key" ["SharedAccessKey=", "SharedSecretValue="] not_placeholder
        r"(?:SharedAccessKey|SharedSecretValue)=(?P<secret>(?:[A-Za-z0-9+/]|\\/){20,}={0,2})";
    // The signature of Azure SAS URLs and tokens, `…&sig=…`.
    "azure-sas-signature" ["sig="] alnum
        r"(?:[?&;]|\\u0026|&amp;)sig=(?P<secret>(?:[A-Za-z0-9+/=]|%[0-9A-Fa-f]{2}|\\/){20,})";
    // Microsoft Entra ID (Azure AD) client secrets, `…Q~…`.
    "azure-ad-client-secret" ["Q~"] ends_here
        r"(?:^|[^A-Za-z0-9_~.-])(?P<secret>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})";
    // Azure DevOps personal access tokens of the 84-character format.
    "azure-devops-pat" ["AZDO"] always
        r"{LEAD}(?P<secret>[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4})(?-u:\b)";
    // age encryption secret keys.
    "age-secret-key" ["AGE-SECRET-KEY-1"] always
        r"AGE-SECRET-KEY-1(?P<secret>[0-9A-Z]{50,})";
    // Sentry organization and user auth tokens.
    "sentry-token" ["sntrys_", "sntryu_"] alnum
        r"{LEAD}sntry[su]_(?P<secret>(?:[A-Za-z0-9+/=_]|\\/){40,})";
    // Grafana Cloud, service-account and legacy API keys.
    "grafana-token" ["glc_", "glsa_", "eyJrIjoi"] alnum
        r"{LEAD}(?:glc_|glsa_|eyJrIjoi)(?P<secret>(?:[A-Za-z0-9+/=_]|\\/){32,})";
    // New Relic user API and insert keys.
    "new-relic-key" ["NRAK-", "NRII-"] alnum
        r"{LEAD}NR(?:AK|II)-(?P<secret>[A-Za-z0-9-]{20,})";
    // 1Password service-account tokens, `ops_eyJ…`.
    "1password-service-account-token" ["ops_eyJ"] always
        r"{LEAD}ops_(?P<secret>eyJ(?:[A-Za-z0-9+/=_-]|\\/){50,})";
    // Alibaba Cloud access key ids, `LTAI…`.
    "alibaba-access-key-id" ["LTAI"] mixed_alnum
        r"{LEAD}LTAI(?P<secret>[A-Za-z0-9]{20})(?-u:\b)";
    // Mapbox secret tokens, `sk.eyJ…`; public `pk.` tokens are left alone.
    "mapbox-secret-token" ["sk.eyJ"] always
        r"{LEAD}sk\.(?P<secret>eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)";
    // Tailscale auth, API and client keys, `tskey-…`.
    "tailscale-key" ["tskey-"] alnum
        r"{LEAD}tskey-(?P<secret>[A-Za-z0-9-]{20,})";
    // Square access tokens and OAuth secrets.
    "square-token" ["sq0atp-", "sq0csp-"] alnum
        r"{LEAD}sq0(?:atp|csp)-(?P<secret>[A-Za-z0-9_-]{22,})";
    // Shippo API tokens.
    "shippo-token" ["shippo_live_", "shippo_test_"] always
        r"{LEAD}shippo_(?:live|test)_(?P<secret>[a-fA-F0-9]{40})";
    // Flutterwave secret and encryption keys.
    "flutterwave-secret-key" ["FLWSECK"] always
        r"{LEAD}FLWSECK(?:_TEST)?-(?P<secret>[a-fA-F0-9]{12,}(?:-X)?)";
    // PlanetScale service tokens, passwords and OAuth tokens.
    "planetscale-token" ["pscale_"] alnum
        r"{LEAD}pscale_(?:tkn|pw|oauth)_(?P<secret>[A-Za-z0-9_.=-]{32,})";
    // Supabase access tokens and secret keys.
    "supabase-key" ["sbp_", "sb_secret_"] alnum
        r"{LEAD}(?:sbp_|sb_secret_)(?P<secret>[A-Za-z0-9_-]{30,})";
    // LangSmith personal and service keys.
    "langsmith-api-key" ["lsv2_"] always
        r"{LEAD}lsv2_(?:pt|sk)_(?P<secret>[a-f0-9]{32}_[a-f0-9]{10})";
    // Pinecone API keys, `pcsk_…`.
    "pinecone-api-key" ["pcsk_"] alnum
        r"{LEAD}pcsk_(?P<secret>[A-Za-z0-9_]{40,})";
    // Tavily API keys, `tvly-…`.
    "tavily-api-key" ["tvly-"] alnum
        r"{LEAD}tvly-(?:dev-|prod-)?(?P<secret>[A-Za-z0-9]{24,})";
    // Dynatrace API tokens, `dt0c01.…`.
    "dynatrace-token" ["dt0c01."] always
        r"{LEAD}dt0c01\.(?P<secret>[A-Za-z0-9]{24}\.[A-Za-z0-9]{64})";
    // Fly.io access and macaroon tokens.
    "flyio-token" ["fo1_", "fm1a_", "fm1r_", "fm2_"] alnum
        r"{LEAD}(?:fo1_|fm1[ar]_|fm2_)(?P<secret>(?:[A-Za-z0-9+/=_-]|\\/){40,})";
    // Facebook / Meta Graph API access tokens, `EAA…`.
    "facebook-access-token" ["EAA"] mixed_alnum
        r"{LEAD}EAA(?P<secret>[A-Za-z0-9]{90,})";
    // Telegram bot tokens, `<bot id>:AA…`.
    "telegram-bot-token" [":AA"] ends_here
        r"(?:{LEAD}|/bot)(?P<secret>\d{8,10}:AA[A-Za-z0-9_-]{33})";
    // Cloudflare Origin CA keys, `v1.0-…`.
    "cloudflare-origin-ca-key" ["v1.0-"] always
        r"{LEAD}v1\.0-(?P<secret>[a-f0-9]{24}-[a-f0-9]{146})";
    // Sourcegraph access tokens, `sgp_…`.
    "sourcegraph-token" ["sgp_"] always
        r"{LEAD}sgp_(?P<secret>(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40})";
    // Buildkite user access tokens, `bkua_…`.
    "buildkite-token" ["bkua_"] always
        r"{LEAD}bkua_(?P<secret>[a-f0-9]{40})";
    // OpenShift user tokens, `sha256~…` (Docker digests use `sha256:` and are left alone).
    "openshift-token" ["sha256~"] always
        r"{LEAD}sha256~(?P<secret>[A-Za-z0-9_-]{43})";
};

/// `sk-` keys of any vendor: OpenAI's mixed-case base62, or 32+ lowercase hex digits
/// (DeepSeek and other OpenAI-compatible APIs).
fn sk_key(c: &Candidate) -> bool {
    mixed_alnum(c) || (c.secret.len() >= 32 && is_hex_or_uuid(c.secret) && alnum(c))
}

fn mixed_case(c: &Candidate) -> bool {
    has_upper_and_lower(c.secret)
}

fn digit(c: &Candidate) -> bool {
    has_digit(c.secret)
}

fn alnum_or_mixed(c: &Candidate) -> bool {
    alnum(c) || mixed_case(c)
}

/// A webhook's path, unless it is the documentation's filler
/// (`T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX`).
fn webhook(c: &Candidate) -> bool {
    !is_filler(c.secret)
}

/// AWS documentation's ids end in `EXAMPLE` (`AKIAIOSFODNN7EXAMPLE`).
fn not_example(c: &Candidate) -> bool {
    !c.secret.ends_with("EXAMPLE")
}

#[cfg(test)]
mod tests {
    use super::super::rules::testing::{case, check_table, Case};
    use super::*;

    // Values are random strings generated for these tests in each vendor's format, split
    // with `concat!` so that secret scanners do not flag this file.
    const ANT_API: &str = concat!("sk-ant-api03-", "28wZkeWXdjQ6opsajEM0B9mu3f7_gO8GEEV7iVk4uBymwgoCvnJ0UCV-O5Ke9h_npftHWI8iVu0x0kFqF8d23f1pYg4XWAA");
    const ANT_ADMIN: &str = concat!("sk-ant-admin01-", "kRpOZYR-efOGfubQmhx3r8V4tQ12rHzLJsHJ8HAhbpffWkxTFek53Eeb4GJSidulnSs5_HG-B6NiTzGmLjTlj8oJVg8QYAA");
    const ANT_OAT: &str = concat!("sk-ant-oat01-", "ImzEkRMfDhvrNCbR4QedNFqME7n8ygP1a8gkfOiOWBFcqX1RfZFRK66Tf925T8zqqs3WZwZbHOglJZhLRXHpJNQT1gdEbAA");
    const ANT_ORT: &str = concat!("sk-ant-ort01-", "YF_NaNyzjgUvCedaS86w53bnUhP0yQF7x0lotGumgL0XmikPTPVso72BkM7pHLuwCZGmFfUDh2NhticYOII2R8X7R4TaKAA");
    const OPENAI_PROJ: &str = concat!("sk-proj-", "wJg6ZQ6bEoroGvvYyDZ63dFJJQ5y_9MCM41m2yzrNqfDbJmEPqZ1glVwn_hDbyWxodT9lP6i-eT3BlbkFJp_6i-yt7oqzxR5u29zMAHNZFEa5DHUJ9SPx2tnemLxM2MBvmb3Wu7iBKQAh1DMgmM-UFiLPU7o");
    const OPENAI_SVC: &str = concat!("sk-svcacct-", "8ilsjt2TqCfDYNF8Z7oA5Cc-Y10LsGinfWTZ0ABIya2F2Y1oKCrzUtuwGRT3BlbkFJtG07XLV-I4U-Jiuzk5hQa8AswDl4pf_80R41h_BkGfUNU0JGIDDI-H95jE");
    const OPENAI_ADMIN: &str = concat!("sk-admin-", "8KgvCep6pMR3RCg53IEQASlslno83okF-BCrFji5ViQLFJw444Ol-GtdEiT3BlbkFJdgPyJXyoxte7g2rFsv_tiKZ4-E2yg4rOpelA3rnpgj1vZlqxCYc-gZoMsg");
    const OPENAI_USER: &str = concat!("sk-", "Ko4KXM90czfnlygNBFr5T3BlbkFJTQWke4MPnTZ3HDW0Idmg");
    const DEEPSEEK: &str = concat!("sk-", "874855daa9b396f1c0b11685d37ce246");
    const OPENROUTER: &str = concat!(
        "sk-or-v1-",
        "d8bea7f0011150c7522aba6f69060c0518ff7c158fd29c17abd67e9ea249fe2d"
    );
    const GROQ: &str = concat!(
        "gsk_",
        "wvjxrnY9u4M7tTkZjsxNb3YN4WbNK2KMEEKZyELTdtkdYXg2aMCb"
    );
    const XAI: &str = concat!(
        "xai-",
        "vjMG1CAtm1Tc47h5La9jDd8yYHWo0g9fsywPItNVrzr6HbhhxqExItKv2FcVqFZI1kfRmjuF9U9pPw19"
    );
    const HF: &str = concat!("hf_", "dejEijSdGnINBYlGsGenSwUJFHgAXmgeIi");
    const HF_ORG: &str = concat!("api_org_", "wWwGRvifOqWlowPYhwJpJXDfXgaogDvLoH");
    const REPLICATE: &str = concat!("r8_", "JyOYlUD3bNnqHlnEwSUB5wdXnyBJVeKkTwiji");
    const PPLX: &str = concat!("pplx-", "AR1rREid4lvOMA3tfVUX6OdSsiAPK87808cD8y0HFLeTdF4O");
    const AWS_ID: &str = concat!("AKIA", "EPVYF3EDFEAWDKVD");
    const GHP: &str = concat!("ghp_", "yzKcxtlipszL3gsFyOzvxKMNq2QJGbQVqWP5");
    const GHO: &str = concat!("gho_", "8jEHFkMpt4pf9awOYiAqctFerl9cZFhEXOHi");
    const GHU: &str = concat!("ghu_", "lTSdR6zBq5RiyMUAJF7a6k6u37qPsxu139EP");
    const GHS: &str = concat!("ghs_", "g3i4rPCrW3d2BhtY05f58g8yeB5RRkeE14Lv");
    const GHR: &str = concat!("ghr_", "PTfVZXgMDCelXEmMW0kulQWavXBFSDfsBgR1");
    const GH_PAT: &str = concat!(
        "github_pat_",
        "GQl6WAXsxZpGcBntTfMcOj_egQjMoFDraJkq0vSL0zHYr4zeTlqcp5PJiFE8JscnDAPPJJjzxIgzi5sKQg"
    );
    const GLPAT: &str = concat!("glpat-", "vBYS9OPO-OTClDP9bNwJ");
    const GLRT: &str = concat!("glrt-", "561ztBjqBlGCXZAkKWxB");
    const GLDT: &str = concat!("gldt-", "BrwpNX-vHauI7sq1SU5J");
    const XOXB: &str = concat!(
        "xoxb-",
        "5875495380394-0752190881829-who3Nh8olUZBl3dZ1sYwk4Ds"
    );
    const XAPP: &str = concat!("xapp-", "1-K2E3UEHMFYV-9015771049258-1a44b835b169da1ddb2ff0e0dc05d920bc53bec433d6672fb2bc85bce8fc71dc");
    const XOXE: &str = concat!("xoxe.xoxp-", "1-N36EJ5PQXF77QPMM5BB8HR583VQDVZDQYNKGZ4EH6HUOSY3I78T0IH78CAGL16NMJXRCEVAVMNCAJ42EH3TOONQJ6XZZA3IK43PJFZF0BXJ41OLOXGIG46Y3GSY0RSHHRUP41UB4FKEVBT5S4DTW70BHO3MS45ATFZM5C0");
    const SLACK_HOOK: &str = concat!(
        "https://hooks.slack.com/services/",
        "TBKA7GRMA/BLMAYPZB1EV/6ZUHhoMtha7GuSrjTCeb03mu"
    );
    const DISCORD_HOOK: &str = concat!(
        "https://discord.com/api/webhooks/",
        "7564945377085158517/NPkxgs_5KCPEaHu8wbh-nlT5l9ALIkO0wBYUVAdd_mKJIlQLp3xwaOAhn6tlN19LTpPz"
    );
    const STRIPE_SK: &str = concat!("sk_live_", "hswxA920JptBi996W1bu8SyFTfNA4SjqEQy5OaRTZrnUZZrQ2XZlp3YEQxOJAXpOzhUqqc4JaoiPZ7GQpOdzO7sztChfa68Oks5");
    const STRIPE_RK: &str = concat!("rk_test_", "ni5uHd5UwUFDsyAqIAXg3jdpARwHD9pn3CXpbOMySuhF79LFHvRRRaYvhAa0iHYzwNMLqOFviWaiAkQfYmGZJi6NnG5bbThcoB5");
    const WHSEC: &str = concat!("whsec_", "T14Qq9wbfrYq8iJDaRRETXWVROncTY1r");
    const GOOGLE: &str = concat!("AIza", "Wa3T9j8-_0__zPC6L1COQTni6QPyS83EUhM");
    const YA29: &str = concat!("ya29.", "MhS1PgJ8J5lmdLEX130GgA8HSPAGW_cIEPTXzorzYx5zwOVbZH3O2kU1tFwebKyHeyJxTZixLKWzYK_L-uG96cDMU-8aqsD3x1do8QOXlF8zBdl-hjikcHOEwDQMBaGBqVH-NCbysi3cjeTjVpwTqj");
    const GOCSPX: &str = concat!("GOCSPX-", "iU7kX6BV1kgFocpZMmhSxdpURNGL");
    const G_REFRESH: &str = concat!("1//0", "TyuzE5D_rs8ai9omPqfGUam3X_v9YXqEWu21YeDWtdBoN1jNzN3jHohFoiZlIEBRsU1P1kLwbCUpU_hqffKtD5jt0SmRI4Y4nXtx");
    const NPM: &str = concat!("npm_", "zUvYw57rwElmNylXKpVz1yCxMnqYvpUQStsW");
    const PYPI: &str = concat!("pypi-", "AgEIcHlwaS5vcmcZTxxMZwF5NlRQVgBS2fp8KoD3atpi5HbdUuyRKNvxRvu3sL-YUGUCEWOW9bArLXHsGZMapZTHvU1kNq6mW53CfY5_g9H0kY6jUd8qk9SNBQn7IrLdKgl2I3i");
    const CRATES: &str = concat!("cio", "NJPzwlhv3fuIkQ59w44bUQm49QIab9f7");
    const DOCKER: &str = concat!("dckr_pat_", "DcYtIrXmt99Ue0STqJeEyX1GbKO");
    const DO: &str = concat!(
        "dop_v1_",
        "4b66bae803a181ec0f62d963eac18b96d9fe23e31a9515b769a045f52d802762"
    );
    const SENDGRID: &str = concat!(
        "SG.",
        "2_4F4uYopLgDER6sYDmxQb.bEUd_bhIJBLe36kw-J8Qmu1PFBOn1Rlik-JB-xSuBDt"
    );
    const TWILIO: &str = concat!("SK", "672005ed217a33c113ddd3cab40fbbef");
    const MAILGUN: &str = concat!("key-", "90d024bb94ab1246db5c63c112fdbf3d");
    const MAILCHIMP: &str = concat!("54a9885911eb690589", "77f4701b0e3609-us21");
    const SHOPIFY: &str = concat!("shpat_", "2a98a9a3ccf3f76de2088bcac0b7a2dd");
    const ATLASSIAN: &str = concat!("ATATT3", "aR9RhwfC2FF4b45-pkYmzvN6_mgkZVcYTaqoMuG0CyAuOf0WSF7ARhcGW5wi8hahVYL6VRwN3RKfgDxnZl8gZnIL6SqOyUBHwmASI8_7TE3i1B9MkTkUuQ-MrVb6mvb3Yqt-Y4bTfeP6f_9eZ9RxzEdeZcEg5vxOQ0udIyb_H4CyNs5f6ZFE84msOF");
    const BITBUCKET: &str = concat!("ATBB", "RseI7dGjkewIQ8Vlul6c1ZTZdAYikKuM");
    const LINEAR: &str = concat!("lin_api_", "MuCuKpwbesHfZkesf9UTCFoUYWJhe9nKCecaJI8E");
    const NOTION: &str = concat!("ntn_", "94568490992R1J7OdCMoeo9SDzZ3P3TBC41zKbs4xtmgtM");
    const VERCEL: &str = concat!(
        "vcp_",
        "Rhoj2jJejlw6ewZOVXsWHdzcp8OjoMJARdKI1hTm6IorkHx5yHtvhnZd"
    );
    const NETLIFY: &str = concat!("nfp_", "x4a78yXDKkOFkrQ5ayDheLdOkUR7nrZzQNsm");
    const HEROKU: &str = concat!(
        "HRKU-",
        "AAAZdYE7LRYTJFSw6oegPDXkBot3WOmr6A_n50QKPRyn6BWWm9qt64FYUQGZ"
    );
    const DOPPLER: &str = concat!("dp.pt.", "zEojhD300jzpF8qLsVepzmy62R56AjcygZ0M2iBbYyJ");
    const VAULT: &str = concat!("hvs.", "rIEcVTl8imu-5aHeymWW8tCxMSo-9R9yjF3gbQgbnyDmwfdJzUFsZQfqj7hmr-Iq5Zl6dT6f_jAUkxCZ5rOJSKqw-QWB_ru");
    const PULUMI: &str = concat!("pul-", "a6426a53b2df0c3567a63440e77c30af3cdc9501");
    const POSTMAN: &str = concat!(
        "PMAK-",
        "e59551edde6e5690c3b0de9f-c4b85ee992915720e7c64c061a5e79353e"
    );
    const DATABRICKS: &str = concat!("dapi", "ef5ce08f09e68cd8c99529fa5291c979");
    const AZ_ACCOUNT_KEY: &str = concat!(
        "hSrUzwYoW4X+wCD8ugsEdWbGObdoJqsDFrQGZD4CnXNI",
        "GCLQpHCwSjZqlug5l0FPgI77Lj2/8PwZmZhCtHv2oz=="
    );
    const AZ_SHARED_KEY: &str = concat!("SAFqF41BgJUI99B/1Ne7yt", "tjRX+Iqfi0oIQ6vP/amhC=");
    const AZ_SIG: &str = concat!("WRX7Q2JtczjanCWevoIq%2B", "N7gSXTvKraDSDGlnLBhK%3D");
    const AZ_AD: &str = concat!("y4L8Q~6Iui7nJ_0skyfp", "X7XOCRKtPPtIY3jeefOZ");
    const AZ_DEVOPS: &str = concat!(
        "IfbiYp8MBjTSzVGYuOHguXDLs8EsP5qXLFuJwvIwRR",
        "ll1KiJdAimJQQJ998k7lHBiRlH4XPsj6IFAZDOEgP3"
    );
    const AGE: &str = concat!(
        "AGE-SECRET-KEY-1",
        "22EZ5VMTNY7GDQPVXD3D9UC9D3ALS5SGE2SRXNFEQYMJMVV24F9UZ7TUCW"
    );
    const SENTRY: &str = concat!(
        "sntryu_",
        "506da6f1db4a2b594dd57900d33d2b5d965d9e86e29e331f310861894c1a3b17"
    );
    const GRAFANA: &str = concat!("glsa_", "T8g65PrbrIEDbW12AE255MogbDj8PbSi_f9b7aab0");
    const NEWRELIC: &str = concat!("NRAK-", "WB5LK811Q8SB479JVE0P76V5UDM");
    const OP: &str = concat!("ops_", "eyJIjwi2yHVfHtFCWfXoFgEH4c3NjJdcojIVX99aa0tQDZlgKVGehI21cxAEpMZvJY97gKgPSLVViTNYosW5gcc32fwZbNMOFq1dYDeI3llOTZVYn13F7OXfVMhccvW4Gx1vGn9uFBv8AzXLzuBl9N5SPNrnx0G7KmFZN2DUuYOoAEmO4LuFsyykzRf02tqBtTsg3dEVERU69KC6kC3ZAsbNqEUkqDfAljmiwfOw5nVEloF2sDYene4Pezr10J53lACnMPR");
    const TFC: &str = concat!(
        "7iqolpj43njisq.atlasv1.hq3_db5_6ky7va0h0-5zey",
        "52sx0uvmnyn17d7irfoeyiaebbp2l9uwzav2kt496hw37"
    );
    const RUBYGEMS: &str = concat!(
        "rubygems_",
        "fc6c55d3a14b2303351d615f5c47ee74df2605f16370a147"
    );
    const NUGET: &str = concat!("oy2", "0l6r6z8jj518mso1fq6wm0yvrgrt8zpo23epymel0u3");
    const CLOJARS: &str = concat!(
        "CLOJARS_",
        "n9m4eps556ioshirnf0rorjnxmpwltiefmxcwj6afvydazp2tk2b0n9qlzx2"
    );
    const ALIBABA: &str = concat!("LTAI", "QoSJaS1VA7o8COwj8UQT");
    const MAPBOX: &str = concat!("sk.", "eyJ1IjoiYWJjIiwiYSI6IjEyMyJ9.9O5xE08xr_FBIzCC3rcdbg");
    const TAILSCALE: &str = concat!(
        "tskey-auth-",
        "NtowSdB2mMZgCNTRL-3UbO1XeCxGCaxt4hTk3G9MPeH5E2MfV4H"
    );
    const SQUARE: &str = concat!("sq0atp-", "hyhhI0VMhbXZI7jMGFPa-e");
    const SHIPPO: &str = concat!("shippo_live_", "c8eef1c25869608f8f1ac004b382b51f2f9e685e");
    const FLUTTERWAVE: &str = concat!("FLWSECK_TEST-", "f90b3385ec081e995c4643d32b35c3f5-X");
    const PSCALE: &str = concat!("pscale_tkn_", "7prG1o-JtbSzFuUYPrtdMGCtHPG5tpQEKZJHiZR7NHA");
    const SUPABASE: &str = concat!("sbp_", "1a7a8498f8a949123eae7f9c4ebc7e52f8ac91a4");
    const LANGSMITH: &str = concat!("lsv2_pt_", "2e420ef76fe00e4b33432d65e63902d5_6e13715e91");
    const PINECONE: &str = concat!(
        "pcsk_",
        "NtJ78_awMWNZKp8BPHImTKmq2ceHv2BmKQfO1JR8lXS2AXrlfdDxwIbLgRhZmoJ7C1Khcb"
    );
    const TAVILY: &str = concat!("tvly-", "brsQm6E8fQ5kFs77xNu6Mq8QXX57yiYq");
    const DYNATRACE: &str = concat!(
        "dt0c01.",
        "WCSR2PUD3USKMMNC04SDT0B4.3WLS0WLHMRJZAIC0UGI90QZ5T4D60QOX1SJU8YOU8TUDBAGUE9VR1PFCXHY5ZTU9"
    );
    const FLY: &str = concat!("fo1_", "2Eh_1e9ZAehNrb2rC8i_lILXp9p05uSe4Yyba0Sf0iH");
    const FACEBOOK: &str = concat!("EAA", "CiR9yBE0aBiX5yHSg3lckyxOlqSt83SQKkXBpO3DQeuzsqLfwRYeQn5aZgMFFdA8Zcg30OSco5fDypDG6BUGb1WamLhGys6XDA2OyzQYyIhVKDUY7LhLNEm0L");
    const TELEGRAM: &str = concat!("6913919095:AAXD3aLWwVJ-", "YdwVnPFmYNRoj5L8YtVmPZC");
    const CF_ORIGIN: &str = concat!("v1.0-", "d689f8f3f4a9580fb461743e-b9c7147066cb06b5843b07d11f2edc522c4aa8724a5f3647a557d423d8f213398f833712c85c28dbb38193cd3b5eda1e7d961de93c1ee4b798e5969c236c11629899615e9bad6b0685");
    const SOURCEGRAPH: &str = concat!(
        "sgp_",
        "8a8a75019a0d51b9_e993062d28872a370d90c922623ad270b59d6f9b"
    );
    const BUILDKITE: &str = concat!("bkua_", "3d8802df9c6b6ea820e4017328a6bfd560ab7752");
    const OPENSHIFT: &str = concat!("sha256~", "WyPpd4elULdnX0S0pTR0I_ygjfsGIiXQE7sjhO-adco");
    const ARTIFACTORY: &str = concat!(
        "AKCp",
        "qo0i93bhSXCAvpjpSMHYKmB5VhTLxBA5O1PVyW8wJoe3bwvQIhVCiXotnFa5CAgkG34nO"
    );
    const BREVO: &str = concat!(
        "xkeysib-",
        "a53f13197963c2b9fd2efd5f70138ae2bd4cbdd4076e36d35600519643ca2841-sEOVuzc063I91C0E"
    );
    const TEAMS_HOOK: &str = concat!("https://contoso.webhook.office.com/webhookb2/", "ffa116cf-eed2-002f-83ac-0540e895433d@8c1de57f-2a25-ad63-6e2b-725f203fc6dd/IncomingWebhook/c0eb54a08d7d7bbea9c9c0152ad847b6/458714a3-b3c4-a367-926a-9655da13ea9b");
    const STS: &str = concat!("IQoJb3JpZ2luX2VjEJ+2HlvJt+AZWJzkOe2+ZFzcpaP7zChcOw/LJTT6KcdV8ZxAdYEpzuxkLYJOBwrlh8KWp6VcxspGqlSPNAk08EraYgdptvOJ8Z5qXwfA2p2VrLipIBei+tSYKuMg3VGvMeJcFEgN/7+z2R2", "wbAWwICWN4QHeYNCTwvqQ3Qbm0ZrMgJ85g6SpIdRaNUJUUY8SesEs371krFbwXWP69U4zMxNSBtlW8s2oO7ZwQ+3vclmlc8O+Uo95pT8gGPQgoqtGiRhOceWcVQEpX3Tgd6DI01VZ3jGQVS/htt+9TLlxv6Msc==");

    fn cases() -> Vec<Case> {
        vec![
            case(
                "anthropic-api-key",
                format!("export ANTHROPIC_API_KEY={ANT_API}"),
                "export ANTHROPIC_API_KEY=sk-ant-api03-[REDACTED]",
                "the sk-ant-api-docs page and sk-ant-api03-short",
            ),
            case(
                "anthropic-admin-key",
                format!("\"{ANT_ADMIN}\""),
                "\"sk-ant-admin01-[REDACTED]\"",
                "sk-ant-admin-console-settings-page-link",
            ),
            case(
                "anthropic-oauth-access-token",
                format!("token: {ANT_OAT}\\n"),
                "token: sk-ant-oat01-[REDACTED]\\n",
                "sk-ant-oat01- is the prefix of OAuth tokens",
            ),
            case(
                "anthropic-oauth-refresh-token",
                format!("refresh={ANT_ORT}&x=1"),
                "refresh=sk-ant-ort01-[REDACTED]&x=1",
                "see sk-ant-ort01-xxxxxxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "openrouter-api-key",
                format!("Bearer {OPENROUTER}"),
                "Bearer sk-or-v1-[REDACTED]",
                "sk-or-v1-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "openai-project-key",
                format!("[{OPENAI_PROJ}]"),
                "[sk-proj-[REDACTED]]",
                "sk-proj-settings-for-the-dashboard-page",
            ),
            case(
                "openai-service-account-key",
                format!("({OPENAI_SVC})"),
                "(sk-svcacct-[REDACTED])",
                "sk-svcacct-keys-are-listed-under-projects",
            ),
            case(
                "openai-admin-key",
                format!("{OPENAI_ADMIN}."),
                "sk-admin-[REDACTED].",
                "sk-admin-panel-components-and-layouts",
            ),
            case(
                "openai-api-key",
                format!("{OPENAI_USER} and {DEEPSEEK}"),
                "sk-[REDACTED] and sk-[REDACTED]",
                "class=\"sk-spinner-double-bounce-animation\" risk-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op",
            ),
            case(
                "groq-api-key",
                format!("GROQ: {GROQ}"),
                "GROQ: gsk_[REDACTED]",
                "gsk_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "xai-api-key",
                format!("{XAI}\\r\\n"),
                "xai-[REDACTED]\\r\\n",
                "xai-grok-2-latest-model-name-and-other-words-that-go-on",
            ),
            case(
                "huggingface-token",
                format!("{HF} {HF_ORG}"),
                "hf_[REDACTED] api_org_[REDACTED]",
                "hf_hub_download and hf_transfer and hf_abcdefghijklmnopqrstuvwxyzabcdefgh",
            ),
            case(
                "replicate-api-token",
                format!("r={REPLICATE};"),
                "r=r8_[REDACTED];",
                "r8_ is the prefix; r8_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ),
            case(
                "perplexity-api-key",
                PPLX.to_string(),
                "pplx-[REDACTED]",
                "pplx-api-docs-for-the-search-endpoint-and-more-words",
            ),
            case(
                "aws-access-key-id",
                format!("aws_access_key_id = {AWS_ID}\\n"),
                "aws_access_key_id = AKIA[REDACTED]\\n",
                "AKIAIOSFODNN7EXAMPLE and AKIAq7xk2m9rzp4lw3nb and AKIA alone",
            ),
            case(
                "aws-sts-session-token",
                format!("\"{STS}\""),
                "\"[REDACTED]\"",
                "IQoJb3JpZ2lu alone",
            ),
            case(
                "github-pat",
                format!("remote: {GHP}"),
                "remote: ghp_[REDACTED]",
                "ghp_short and myghp_R8kZ2mQ9pL4wX7nB3vH6cJ1dF5sG0aYtE2uK",
            ),
            case(
                "github-oauth-token",
                format!("$ gh auth token\\n{GHO}\\n"),
                "$ gh auth token\\ngho_[REDACTED]\\n",
                "gho_ alone",
            ),
            case(
                "github-app-token",
                format!("x-access-token:{GHS} {GHU}"),
                "x-access-token:ghs_[REDACTED] ghu_[REDACTED]",
                "ghs_ and ghu_ prefixes",
            ),
            case(
                "github-refresh-token",
                format!("refresh_token={GHR}"),
                "refresh_token=ghr_[REDACTED]",
                "ghr_ prefix",
            ),
            case(
                "github-fine-grained-pat",
                format!("GH_TOKEN={GH_PAT}"),
                "GH_TOKEN=github_pat_[REDACTED]",
                "github_pat_ prefix",
            ),
            case(
                "gitlab-pat",
                format!("PRIVATE-TOKEN: {GLPAT}"),
                "PRIVATE-TOKEN: glpat-[REDACTED]",
                "glpat-xxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "gitlab-runner-token",
                format!("token = \"{GLRT}\""),
                "token = \"glrt-[REDACTED]\"",
                "glrt-xxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "gitlab-token",
                GLDT.to_string(),
                "gldt-[REDACTED]",
                "gldt-documentation-page-about-deploy-tokens",
            ),
            case(
                "slack-config-token",
                XOXE.to_string(),
                "xoxe.xoxp-[REDACTED]",
                "xoxe.xoxp- prefix",
            ),
            case(
                "slack-token",
                format!("SLACK={XOXB}"),
                "SLACK=xoxb-[REDACTED]",
                "xoxb- and xoxo-hugs-and-kisses",
            ),
            case(
                "slack-app-token",
                XAPP.to_string(),
                "xapp-[REDACTED]",
                "xapp-level-tokens-are-described-here",
            ),
            case(
                "slack-webhook",
                format!(
                    "post to {SLACK_HOOK}.\n?url={}&x=1",
                    SLACK_HOOK.replace(':', "%3A").replace('/', "%2F")
                ),
                "post to https://hooks.slack.com/services/[REDACTED].\n\
                 ?url=https%3A%2F%2Fhooks.slack.com%2Fservices%2F[REDACTED]&x=1",
                "https://hooks.slack.com/ and https://api.slack.com/apps\n\
                 https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            ),
            case(
                "discord-webhook",
                format!(
                    "{DISCORD_HOOK}?wait=true\n?to={}",
                    DISCORD_HOOK.replace(':', "%253A").replace('/', "%252F")
                ),
                "https://discord.com/api/webhooks/[REDACTED]?wait=true\n\
                 ?to=https%253A%252F%252Fdiscord.com%252Fapi%252Fwebhooks%252F[REDACTED]",
                "https://discord.com/api/webhooks and https://discord.com/developers/docs",
            ),
            case(
                "microsoft-teams-webhook",
                TEAMS_HOOK.to_string(),
                "https://contoso.webhook.office.com/webhookb2/[REDACTED]",
                "https://contoso.webhook.office.com/",
            ),
            case(
                "zapier-webhook",
                "https://hooks.zapier.com/hooks/catch/4815162/o2x9k7q/".to_string(),
                "https://hooks.zapier.com/hooks/catch/[REDACTED]",
                "https://hooks.zapier.com/hooks/catch/",
            ),
            case(
                "stripe-secret-key",
                format!("stripe.api_key = \"{STRIPE_SK}\""),
                "stripe.api_key = \"sk_live_[REDACTED]\"",
                "sk_live_ and sk_test_xxxxxxxxxxxxxxxxxxxxxxxx and pk_live_51HqLyjWDarjtT1zdp7dc",
            ),
            case(
                "stripe-restricted-key",
                STRIPE_RK.to_string(),
                "rk_test_[REDACTED]",
                "rk_test_ prefix",
            ),
            case(
                "stripe-webhook-secret",
                WHSEC.to_string(),
                "whsec_[REDACTED]",
                "whsec_ prefix",
            ),
            case(
                "google-api-key",
                format!("?key={GOOGLE}&q=1"),
                "?key=AIza[REDACTED]&q=1",
                "AIzaSyXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
            ),
            case(
                "google-oauth-access-token",
                YA29.to_string(),
                "ya29.[REDACTED]",
                "ya29.short and ya29.a0_is_the_prefix_of_tokens",
            ),
            case(
                "google-oauth-client-secret",
                format!("\"client_secret\":\"{GOCSPX}\""),
                "\"client_secret\":\"GOCSPX-[REDACTED]\"",
                "GOCSPX- prefix",
            ),
            case(
                "google-oauth-refresh-token",
                G_REFRESH.to_string(),
                "1//0[REDACTED]",
                "see 1//0 and 1//0a-path-component-that-is-just-words",
            ),
            case(
                "npm-token",
                format!("//registry.npmjs.org/:_authToken={NPM}"),
                "//registry.npmjs.org/:_authToken=npm_[REDACTED]",
                "npm_config_registry and npm_package_version_and_name_of_it",
            ),
            case(
                "pypi-token",
                format!("password = {PYPI}"),
                "password = pypi-[REDACTED]",
                "pypi-AgE alone",
            ),
            case(
                "crates-io-token",
                format!("CARGO_REGISTRY_TOKEN={CRATES}"),
                "CARGO_REGISTRY_TOKEN=cio[REDACTED]",
                "precious ciociaria cioabcdefghijklmnopqrstuvwxyzabcdef",
            ),
            case(
                "rubygems-api-key",
                RUBYGEMS.to_string(),
                "rubygems_[REDACTED]",
                "rubygems_mirror and rubygems_version",
            ),
            case(
                "nuget-api-key",
                format!("-ApiKey {NUGET}"),
                "-ApiKey oy2[REDACTED]",
                "oy2 and oy2abcdefghijklmnopqrstuvwxyzabcdefghijklmnopq",
            ),
            case(
                "clojars-token",
                CLOJARS.to_string(),
                "CLOJARS_[REDACTED]",
                "CLOJARS_USERNAME and CLOJARS_PASSWORD",
            ),
            case(
                "dockerhub-token",
                format!("docker login -u me --password-stdin <<< {DOCKER}"),
                "docker login -u me --password-stdin <<< dckr_pat_[REDACTED]",
                "dckr_pat_ prefix",
            ),
            case(
                "artifactory-api-key",
                ARTIFACTORY.to_string(),
                "AKCp[REDACTED]",
                "AKCp alone",
            ),
            case(
                "digitalocean-token",
                DO.to_string(),
                "dop_v1_[REDACTED]",
                "dop_v1_ prefix",
            ),
            case(
                "sendgrid-api-key",
                SENDGRID.to_string(),
                "SG.[REDACTED]",
                "SG.com and SG.example.org",
            ),
            case(
                "brevo-api-key",
                BREVO.to_string(),
                "xkeysib-[REDACTED]",
                "xkeysib- prefix",
            ),
            case(
                "twilio-api-key",
                TWILIO.to_string(),
                "SK[REDACTED]",
                "SKIP_TESTS=1 and TASK and SKabcdefabcdefabcdefabcdefabcdefab",
            ),
            case(
                "mailgun-api-key",
                format!("api:{MAILGUN}"),
                "api:key-[REDACTED]",
                "key-value store and primary-key-0123",
            ),
            case(
                "mailchimp-api-key",
                MAILCHIMP.to_string(),
                "[REDACTED]",
                "en-us and 3f786850e387550fdab836ed7e6dc881-usage",
            ),
            case(
                "shopify-token",
                format!("X-Shopify-Access-Token: {SHOPIFY}"),
                "X-Shopify-Access-Token: shpat_[REDACTED]",
                "shpat_ prefix",
            ),
            case(
                "atlassian-api-token",
                ATLASSIAN.to_string(),
                "ATATT3[REDACTED]",
                "ATATT3 alone",
            ),
            case(
                "bitbucket-app-password",
                BITBUCKET.to_string(),
                "ATBB[REDACTED]",
                "ATBB alone and ATBBxxxxxxxxxxxxxxxxxxxxxxxx",
            ),
            case(
                "linear-api-key",
                LINEAR.to_string(),
                "lin_api_[REDACTED]",
                "lin_api_ prefix",
            ),
            case(
                "notion-token",
                NOTION.to_string(),
                "ntn_[REDACTED]",
                "secret_santa_gift_exchange_list and ntn_",
            ),
            case(
                "vercel-token",
                VERCEL.to_string(),
                "vcp_[REDACTED]",
                "vcp_ prefix",
            ),
            case(
                "netlify-token",
                NETLIFY.to_string(),
                "nfp_[REDACTED]",
                "nfp_ prefix",
            ),
            case(
                "heroku-api-key",
                HEROKU.to_string(),
                "HRKU-[REDACTED]",
                "HRKU- prefix",
            ),
            case(
                "doppler-token",
                DOPPLER.to_string(),
                "dp.pt.[REDACTED]",
                "dp.pt. prefix",
            ),
            case(
                "vault-token",
                format!("VAULT_TOKEN={VAULT}"),
                "VAULT_TOKEN=hvs.[REDACTED]",
                "hvs.example.com and hvs.",
            ),
            case(
                "terraform-cloud-token",
                TFC.to_string(),
                "[REDACTED]",
                "app.terraform.io and x.atlasv1.y",
            ),
            case(
                "pulumi-token",
                PULUMI.to_string(),
                "pul-[REDACTED]",
                "pul-request and pul-",
            ),
            case(
                "postman-api-key",
                POSTMAN.to_string(),
                "PMAK-[REDACTED]",
                "PMAK- prefix",
            ),
            case(
                "databricks-token",
                DATABRICKS.to_string(),
                "dapi[REDACTED]",
                "dapi and dapi-docs",
            ),
            case(
                "azure-storage-account-key",
                format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZ_ACCOUNT_KEY};EndpointSuffix=core.windows.net"),
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net",
                "AccountKey=<your-key>;",
            ),
            case(
                "azure-shared-access-key",
                format!("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={AZ_SHARED_KEY}"),
                "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=[REDACTED]",
                "SharedAccessKeyName=RootManageSharedAccessKey",
            ),
            case(
                "azure-sas-signature",
                format!("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sr=b&sp=r&sig={AZ_SIG}"),
                "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sr=b&sp=r&sig=[REDACTED]",
                "?sig=abc and ?sig=short",
            ),
            case(
                "azure-ad-client-secret",
                format!("\"clientSecret\": \"{AZ_AD}\""),
                "\"clientSecret\": \"[REDACTED]\"",
                "Q~ alone and abc1Q~x",
            ),
            case(
                "azure-devops-pat",
                AZ_DEVOPS.to_string(),
                "[REDACTED]",
                "AZDO alone",
            ),
            case(
                "age-secret-key",
                AGE.to_string(),
                "AGE-SECRET-KEY-1[REDACTED]",
                "AGE-SECRET-KEY-1 prefix",
            ),
            case(
                "sentry-token",
                SENTRY.to_string(),
                "sntryu_[REDACTED]",
                "sntryu_ prefix",
            ),
            case(
                "grafana-token",
                GRAFANA.to_string(),
                "glsa_[REDACTED]",
                "glsa_ and glc_",
            ),
            case(
                "new-relic-key",
                NEWRELIC.to_string(),
                "NRAK-[REDACTED]",
                "NRAK- prefix",
            ),
            case(
                "1password-service-account-token",
                format!("OP_SERVICE_ACCOUNT_TOKEN={OP}"),
                "OP_SERVICE_ACCOUNT_TOKEN=ops_[REDACTED]",
                "ops_eyJ alone",
            ),
            case(
                "alibaba-access-key-id",
                ALIBABA.to_string(),
                "LTAI[REDACTED]",
                "LTAI alone",
            ),
            case(
                "mapbox-secret-token",
                MAPBOX.to_string(),
                "sk.[REDACTED]",
                "pk.eyJ1IjoiYWJjIiwiYSI6IjEyMyJ9.public",
            ),
            case(
                "tailscale-key",
                TAILSCALE.to_string(),
                "tskey-[REDACTED]",
                "tskey-auth- prefix",
            ),
            case(
                "square-token",
                SQUARE.to_string(),
                "sq0atp-[REDACTED]",
                "sq0atp- prefix",
            ),
            case(
                "shippo-token",
                SHIPPO.to_string(),
                "shippo_live_[REDACTED]",
                "shippo_live_ prefix",
            ),
            case(
                "flutterwave-secret-key",
                FLUTTERWAVE.to_string(),
                "FLWSECK_TEST-[REDACTED]",
                "FLWSECK_TEST- prefix",
            ),
            case(
                "planetscale-token",
                PSCALE.to_string(),
                "pscale_tkn_[REDACTED]",
                "pscale_tkn_ prefix",
            ),
            case(
                "supabase-key",
                SUPABASE.to_string(),
                "sbp_[REDACTED]",
                "sbp_ prefix",
            ),
            case(
                "langsmith-api-key",
                LANGSMITH.to_string(),
                "lsv2_pt_[REDACTED]",
                "lsv2_pt_ prefix",
            ),
            case(
                "pinecone-api-key",
                PINECONE.to_string(),
                "pcsk_[REDACTED]",
                "pcsk_ prefix",
            ),
            case(
                "tavily-api-key",
                TAVILY.to_string(),
                "tvly-[REDACTED]",
                "tvly-dev- prefix",
            ),
            case(
                "dynatrace-token",
                DYNATRACE.to_string(),
                "dt0c01.[REDACTED]",
                "dt0c01. prefix",
            ),
            case(
                "flyio-token",
                FLY.to_string(),
                "fo1_[REDACTED]",
                "fo1_ prefix",
            ),
            case(
                "facebook-access-token",
                format!("access_token={FACEBOOK}"),
                "access_token=EAA[REDACTED]",
                "EAAB alone",
            ),
            case(
                "telegram-bot-token",
                format!("https://api.telegram.org/bot{TELEGRAM}/getMe"),
                "https://api.telegram.org/bot[REDACTED]/getMe",
                "12345678:AA short",
            ),
            case(
                "cloudflare-origin-ca-key",
                CF_ORIGIN.to_string(),
                "v1.0-[REDACTED]",
                "v1.0-beta and v1.0-rc1",
            ),
            case(
                "sourcegraph-token",
                SOURCEGRAPH.to_string(),
                "sgp_[REDACTED]",
                "sgp_ prefix",
            ),
            case(
                "buildkite-token",
                BUILDKITE.to_string(),
                "bkua_[REDACTED]",
                "bkua_ prefix",
            ),
            case(
                "openshift-token",
                format!("oc login --token={OPENSHIFT}"),
                "oc login --token=sha256~[REDACTED]",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 and sha256~",
            ),
        ]
    }

    #[test]
    fn every_vendor_family_masks_its_token_and_spares_its_lookalike() {
        check_table(RULES, &cases());
    }
}
