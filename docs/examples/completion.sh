source <(cascade completion bash)   # in ~/.bashrc to keep it; zsh, fish and powershell alike
complete -p cascade
