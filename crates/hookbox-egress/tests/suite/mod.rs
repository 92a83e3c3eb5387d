mod hooks;
mod logs;
mod netns;
mod proxy;
mod ssrf;
mod support;
