mod dispatch;
mod http;
mod parser_props;
mod runner;
mod support;
