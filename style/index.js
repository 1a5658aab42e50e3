import './base.css';
import './sidebar.css';
import './admin.css';
import './increases.css';
