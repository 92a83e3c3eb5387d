mod command;
mod dispatch;
mod extensions;
mod http;
mod parser_props;
mod support;
mod vendor;
