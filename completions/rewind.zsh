
#compdef rewind

_rewind_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _REWIND_COMPLETE=complete_zsh rewind)
}

compdef _rewind_completion rewind

